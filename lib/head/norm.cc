#include "lib/head/norm.h"

#include <cmath>

namespace vocabd {

void RmsNorm(const float* x, int64_t rows, int64_t hidden_size, const float* weight,
             double eps, float* y) {
  if (rows <= 0 || hidden_size <= 0) return;
  const float eps_f = static_cast<float>(eps);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * hidden_size;
    float* yr = y + r * hidden_size;
    double sum_sq = 0.0;
    for (int64_t j = 0; j < hidden_size; ++j) {
      const double v = xr[j];
      sum_sq += v * v;
    }
    const float var = static_cast<float>(sum_sq / static_cast<double>(hidden_size));
    const float inv = 1.0f / std::sqrt(var + eps_f);
    // All reads of row r precede its writes, so x == y is safe.
    for (int64_t j = 0; j < hidden_size; ++j) yr[j] = weight[j] * (xr[j] * inv);
  }
}

void LayerNorm(const float* x, int64_t rows, int64_t hidden_size, const float* weight,
               const float* bias, double eps, float* y) {
  if (rows <= 0 || hidden_size <= 0) return;
  const float eps_f = static_cast<float>(eps);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * hidden_size;
    float* yr = y + r * hidden_size;
    double sum = 0.0;
    for (int64_t j = 0; j < hidden_size; ++j) sum += xr[j];
    const double mean_d = sum / static_cast<double>(hidden_size);
    double sq = 0.0;
    for (int64_t j = 0; j < hidden_size; ++j) {
      const double d = xr[j] - mean_d;
      sq += d * d;
    }
    const float mean = static_cast<float>(mean_d);
    const float var = static_cast<float>(sq / static_cast<double>(hidden_size));
    const float rstd = 1.0f / std::sqrt(var + eps_f);
    for (int64_t j = 0; j < hidden_size; ++j) {
      const float b = bias != nullptr ? bias[j] : 0.0f;
      yr[j] = (xr[j] - mean) * rstd * weight[j] + b;
    }
  }
}

}  // namespace vocabd
