#include "lib/positions/rope_freq.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/core/status_macros.h"

namespace vocabd {
namespace {

// float: correctly rounded pow (float64 pow of the float operands, rounded
// once; equals glibc powf on the tested inputs). double: libm pow.
template <typename T>
T Pow(T a, T b) {
  if constexpr (std::is_same_v<T, float>) {
    return static_cast<float>(std::pow(static_cast<double>(a), static_cast<double>(b)));
  } else {
    return std::pow(a, b);
  }
}

// HF `base ** (arange(0, r, 2).float() / r)`.
template <typename T>
std::vector<T> BasePow(T base, int r) {
  std::vector<T> out(static_cast<size_t>(r / 2));
  for (int i = 0; i < r / 2; ++i) {
    const T e = static_cast<T>(2 * i) / static_cast<T>(r);
    out[static_cast<size_t>(i)] = Pow<T>(base, e);
  }
  return out;
}

// Trained length a scaling type falls back on.
int64_t OriginalLength(const RopeParams& p) {
  return p.scaling.original_max_position_embeddings > 0 ? p.scaling.original_max_position_embeddings
                                                        : p.max_position_embeddings;
}

double YarnMscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

// inv_freq in precision T; `attention` receives the attention scaling.
template <typename T>
absl::StatusOr<std::vector<T>> InvFreq(const RopeParams& p, int64_t seq_len, double* attention,
                                       bool* used_long) {
  const RopeScaling& s = p.scaling;
  const int r = p.rotary_dim;
  const int half = r / 2;
  const T theta = static_cast<T>(p.theta);
  *attention = 1.0;
  *used_long = false;
  std::vector<T> inv(static_cast<size_t>(half));
  switch (s.type) {
    case RopeScalingType::kDefault:
    case RopeScalingType::kLinear: {
      const std::vector<T> bp = BasePow<T>(theta, r);
      for (int i = 0; i < half; ++i) {
        T v = static_cast<T>(1) / bp[static_cast<size_t>(i)];
        if (s.type == RopeScalingType::kLinear) v = v / static_cast<T>(s.factor);
        inv[static_cast<size_t>(i)] = v;
      }
      return inv;
    }
    case RopeScalingType::kDynamic: {
      // HF uses max_position_embeddings; original_max_position_embeddings
      // only when the trained length is not given.
      // (RopeParams::Validate: length > 0, r > 2.)
      const int64_t length =
          p.max_position_embeddings > 0 ? p.max_position_embeddings
                                        : s.original_max_position_embeddings;
      T base = theta;
      if (seq_len > length) {
        // HF dynamic_rope_update: seq_len is an int64 tensor, so this is
        // float32 tensor math in the fp32 recipe.
        T t = static_cast<T>(s.factor) * static_cast<T>(seq_len);
        t = t / static_cast<T>(length);
        t = t - static_cast<T>(s.factor - 1.0);
        const T ex = static_cast<T>(static_cast<double>(r) / static_cast<double>(r - 2));
        base = theta * Pow<T>(t, ex);
      }
      const std::vector<T> bp = BasePow<T>(base, r);
      for (int i = 0; i < half; ++i) inv[static_cast<size_t>(i)] = static_cast<T>(1) / bp[static_cast<size_t>(i)];
      return inv;
    }
    case RopeScalingType::kYarn: {
      const double orig = static_cast<double>(OriginalLength(p));
      const double factor = s.factor;
      if (s.attention_factor > 0.0) {
        *attention = s.attention_factor;
      } else if (s.mscale != 0.0 && s.mscale_all_dim != 0.0) {
        *attention = YarnMscale(factor, s.mscale) / YarnMscale(factor, s.mscale_all_dim);
      } else {
        *attention = YarnMscale(factor, 1.0);
      }
      const double pi = std::numbers::pi;
      auto correction_dim = [&](double rotations) {
        return (static_cast<double>(r) * std::log(orig / (rotations * 2 * pi))) /
               (2 * std::log(p.theta));
      };
      double low = correction_dim(s.beta_fast);
      double high = correction_dim(s.beta_slow);
      if (s.truncate) {
        low = std::floor(low);
        high = std::ceil(high);
      }
      low = std::max(low, 0.0);
      high = std::min(high, static_cast<double>(r - 1));
      if (low == high) high += 0.001;
      const T t_low = static_cast<T>(low);
      const T t_span = static_cast<T>(high - low);
      const std::vector<T> bp = BasePow<T>(theta, r);
      const T one = static_cast<T>(1);
      const T t_factor = static_cast<T>(factor);
      for (int i = 0; i < half; ++i) {
        const T pf = bp[static_cast<size_t>(i)];
        const T extrapolation = one / pf;
        const T interpolation = one / (t_factor * pf);
        T ramp = (static_cast<T>(i) - t_low) / t_span;
        ramp = std::clamp(ramp, static_cast<T>(0), one);
        const T ex = one - ramp;
        inv[static_cast<size_t>(i)] = interpolation * (one - ex) + extrapolation * ex;
      }
      return inv;
    }
    case RopeScalingType::kLlama3: {
      const std::vector<T> bp = BasePow<T>(theta, r);
      const double old_len = static_cast<double>(s.original_max_position_embeddings);
      const T low_wavelen = static_cast<T>(old_len / s.low_freq_factor);
      const T high_wavelen = static_cast<T>(old_len / s.high_freq_factor);
      const T two_pi = static_cast<T>(2 * std::numbers::pi);
      const T factor = static_cast<T>(s.factor);
      const T one = static_cast<T>(1);
      for (int i = 0; i < half; ++i) {
        const T base_inv = one / bp[static_cast<size_t>(i)];
        const T wavelen = two_pi / base_inv;
        T v = wavelen > low_wavelen ? base_inv / factor : base_inv;
        const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
        if (medium) {
          const T smooth = (static_cast<T>(old_len) / wavelen - static_cast<T>(s.low_freq_factor)) /
                           static_cast<T>(s.high_freq_factor - s.low_freq_factor);
          v = ((one - smooth) * v) / factor + smooth * v;
        }
        inv[static_cast<size_t>(i)] = v;
      }
      return inv;
    }
    case RopeScalingType::kLongrope: {
      // orig may be 0 only when the switch and the default attention factor
      // are moot (RopeParams::Validate; GGUF rope_freqs).
      const int64_t orig = OriginalLength(p);
      double factor = s.factor;
      if (s.original_max_position_embeddings > 0 && p.max_position_embeddings > 0) {
        // Phi-3: the factor is the ratio of the two lengths.
        factor = static_cast<double>(p.max_position_embeddings) /
                 static_cast<double>(s.original_max_position_embeddings);
      }
      if (s.attention_factor > 0.0) {
        *attention = s.attention_factor;
      } else if (factor <= 1.0) {
        *attention = 1.0;
      } else {
        *attention =
            std::sqrt(1.0 + std::log(factor) / std::log(static_cast<double>(orig)));
      }
      *used_long = orig > 0 && seq_len > orig;
      const std::vector<double>& ext = *used_long ? s.long_factor : s.short_factor;
      const std::vector<T> bp = BasePow<T>(theta, r);
      for (int i = 0; i < half; ++i) {
        inv[static_cast<size_t>(i)] =
            static_cast<T>(1) / (static_cast<T>(ext[static_cast<size_t>(i)]) * bp[static_cast<size_t>(i)]);
      }
      return inv;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("params.scaling.type = ", static_cast<int>(s.type), " is not a known type"));
}

}  // namespace

absl::StatusOr<RopeFrequencies> ComputeRopeFrequencies(const RopeParams& params, int64_t seq_len,
                                                       bool high_precision,
                                                       std::string_view params_name) {
  RETURN_IF_ERROR(params.Validate(params_name));
  RopeFrequencies f;
  f.half = params.rotary_dim / 2;
  f.high_precision = high_precision;
  ASSIGN_OR_RETURN(f.inv_freq,
                   InvFreq<float>(params, seq_len, &f.attention_scaling, &f.used_long_factor));
  if (high_precision) {
    ASSIGN_OR_RETURN(f.inv_freq_f64, InvFreq<double>(params, seq_len, &f.attention_scaling,
                                                     &f.used_long_factor));
  }
  return f;
}

void RopeFrequencies::CosSin(int64_t position, float* cos_out, float* sin_out) const {
  if (high_precision) {
    const double p = static_cast<double>(position);
    for (int i = 0; i < half; ++i) {
      const double angle = p * inv_freq_f64[static_cast<size_t>(i)];
      cos_out[i] = static_cast<float>(std::cos(angle) * attention_scaling);
      sin_out[i] = static_cast<float>(std::sin(angle) * attention_scaling);
    }
    return;
  }
  // HF: position_ids.float() @ inv_freq (one float32 product), cos/sin in
  // float32, then `* attention_scaling` in float32.
  const float p = static_cast<float>(position);
  const float att = static_cast<float>(attention_scaling);
  for (int i = 0; i < half; ++i) {
    const float angle = p * inv_freq[static_cast<size_t>(i)];
    float c = std::cos(angle);  // cosf
    float s = std::sin(angle);  // sinf
    if (attention_scaling != 1.0) {
      c = c * att;
      s = s * att;
    }
    cos_out[i] = c;
    sin_out[i] = s;
  }
}

std::string RopeFrequencies::Key() const {
  std::string key;
  key.push_back(high_precision ? 'd' : 'f');
  key.append(reinterpret_cast<const char*>(&attention_scaling), sizeof(double));
  if (high_precision) {
    key.append(reinterpret_cast<const char*>(inv_freq_f64.data()),
               inv_freq_f64.size() * sizeof(double));
  } else {
    key.append(reinterpret_cast<const char*>(inv_freq.data()), inv_freq.size() * sizeof(float));
  }
  return key;
}

}  // namespace vocabd
