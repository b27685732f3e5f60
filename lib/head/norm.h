// Final normalisation applied to hidden states before the LM head.
#ifndef VOCABD_LIB_HEAD_NORM_H_
#define VOCABD_LIB_HEAD_NORM_H_

#include <cstdint>

namespace vocabd {

// RMSNorm (Zhang & Sennrich 2019; HF LlamaRMSNorm), in fp32:
//   var     = mean_j(x[r, j]^2)      (sum accumulated in float64, rounded to fp32)
//   inv     = 1 / sqrt(var + eps)    (fp32; eps rounded to fp32, as torch does)
//   y[r, j] = weight[j] * (x[r, j] * inv)   (fp32, HF's operation order)
// x, y: [rows, hidden_size] row-major F32 (may alias: in place is fine);
// weight: [hidden_size] F32. rows <= 0 or hidden_size <= 0 is a no-op.
// A row whose var exceeds FLT_MAX (every |x| from about 1.8e19) gets
// inv = 0 and y = 0, as torch's fp32 does; torch's fp32 x.pow(2) already
// overflows for one such value, where the float64 sum here still
// normalizes the row.
void RmsNorm(const float* x, int64_t rows, int64_t hidden_size, const float* weight,
             double eps, float* y);

// LayerNorm (Ba et al. 2016; torch.nn.LayerNorm, biased variance), in fp32:
//   mean    = mean_j(x[r, j])                 (accumulated in float64)
//   var     = mean_j((x[r, j] - mean)^2)      (float64, two-pass)
//   rstd    = 1 / sqrt(var + eps)             (fp32; eps rounded to fp32)
//   y[r, j] = (x[r, j] - mean) * rstd * weight[j] + bias[j]   (fp32)
// Used by gpt2 (ln_f), gpt_neox (final_layer_norm) and phi
// (final_layernorm). x, y: [rows, hidden_size] F32 (may alias); weight:
// [hidden_size]; bias: [hidden_size] or nullptr (zero bias). A row whose
// var exceeds FLT_MAX gets rstd = 0 and y = bias (NaN where x - mean
// overflows float32, e.g. values of +-FLT_MAX), as torch's fp32 does.
void LayerNorm(const float* x, int64_t rows, int64_t hidden_size, const float* weight,
               const float* bias, double eps, float* y);

}  // namespace vocabd

#endif  // VOCABD_LIB_HEAD_NORM_H_
