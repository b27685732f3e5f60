// Final normalisation applied to hidden states before the LM head.
#ifndef VOCABD_LIB_NORM_H_
#define VOCABD_LIB_NORM_H_

#include <cstdint>

namespace vocabd {

// RMSNorm (Zhang & Sennrich 2019; HF LlamaRMSNorm), in fp32:
//   y[r, j] = x[r, j] / sqrt(mean_j(x[r, :]^2) + eps) * weight[j]
// x, y: [rows, hidden_size] row-major (may alias); weight: [hidden_size].
void RmsNorm(const float* x, int64_t rows, int64_t hidden_size, const float* weight,
             double eps, float* y);

}  // namespace vocabd

#endif  // VOCABD_LIB_NORM_H_
