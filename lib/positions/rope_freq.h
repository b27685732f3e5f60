// RoPE inverse frequencies and attention scaling for every Hugging Face
// scaling type (transformers `modeling_rope_utils.py`, ROPE_INIT_FUNCTIONS,
// and the `dynamic_rope_update` forward hook), in two precisions.
//
// r = rotary_dim, half = r / 2, theta = rope_theta, i in [0, half).
// Float32 recipe (default): every tensor step is one float32 operation, with
// the Python scalars (theta, factor, ...) rounded to float32 where HF mixes
// them with a float32 tensor; Python-side scalar math is float64. pow is
// correctly rounded (float64 pow on the float32 operands, rounded once).
//   e[i]        = float(2i) / float(r)
//   base_pow[i] = float(theta) ** e[i]
//   default:   inv[i] = 1 / base_pow[i]
//   linear:    inv[i] = (1 / base_pow[i]) / float(factor)
//   dynamic:   L = max_position_embeddings (else original_max_position_embeddings);
//              seq_len = max position + 1 of the request (HF: max(position_ids) + 1).
//              seq_len <= L: default. Else (HF tensor path, float32):
//              b = float(theta) * ((float(factor) * float(seq_len) / float(L)
//                                   - float(factor - 1)) ** float(r / (r - 2)))
//              inv[i] = 1 / (b ** e[i])
//   yarn:      O = original_max_position_embeddings (else max_position_embeddings)
//              corr(n) = r * ln(O / (n * 2 pi)) / (2 ln theta)        (float64)
//              low = corr(beta_fast), high = corr(beta_slow); truncate: floor/ceil;
//              low = max(low, 0), high = min(high, r - 1); high += 0.001 if equal
//              ramp[i] = clamp((float(i) - float(low)) / float(high - low), 0, 1)
//              ex[i] = 1 - ramp[i]
//              inv[i] = (1 / (float(factor) * base_pow[i])) * (1 - ex[i])
//                       + (1 / base_pow[i]) * ex[i]
//              attention = attention_factor if set, else
//                 mscale && mscale_all_dim ? m(factor, mscale) / m(factor, mscale_all_dim)
//                                          : m(factor, 1)
//                 with m(s, k) = s <= 1 ? 1 : 0.1 k ln(s) + 1
//   llama3:    wl[i] = float(2 pi) / inv_d[i]  (inv_d = default inv)
//              lw = O / low_freq_factor, hw = O / high_freq_factor  (float64, then float)
//              wl > lw: inv_d / factor;  wl < hw: inv_d;
//              else s = (float(O) / wl - float(low)) / float(high - low),
//                   inv = ((1 - s) * inv_d) / float(factor) + s * inv_d
//   longrope:  O = original_max_position_embeddings (else max_position_embeddings);
//              when O was given, factor = max_position_embeddings / O (Phi-3).
//              seq_len > O: long_factor, else short_factor (HF longrope switch);
//              inv[i] = 1 / (float(ext[i]) * base_pow[i])
//              attention = attention_factor if set, else
//                 factor <= 1 ? 1 : sqrt(1 + ln(factor) / ln(O))
// cos and sin are multiplied by float(attention) (HF: `emb.cos() * attention_scaling`).
//
// High precision (opt-in): the same formulas evaluated in float64 throughout
// (inv_freq_f64, angle = double(position) * inv_freq_f64, cos/sin in float64,
// times attention scaling, rounded once to float32). At position 2^20 the
// float32 angle has an absolute error up to ~0.06 rad; float64 keeps it ~1e-10.
#ifndef VOCABD_LIB_POSITIONS_ROPE_FREQ_H_
#define VOCABD_LIB_POSITIONS_ROPE_FREQ_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/positions/rope_params.h"

namespace vocabd {

struct RopeFrequencies {
  int half = 0;                      // rotary_dim / 2
  std::vector<float> inv_freq;       // [half] float32 recipe (always filled)
  std::vector<double> inv_freq_f64;  // [half] float64 (filled when high_precision)
  double attention_scaling = 1.0;    // multiplies cos and sin
  bool high_precision = false;
  // longrope: true when long_factor was used.
  bool used_long_factor = false;

  // cos/sin of `position` for every pair, already times attention scaling.
  void CosSin(int64_t position, float* cos_out, float* sin_out) const;
  // Bytes that identify these frequencies exactly (cache key).
  std::string Key() const;
};

// Validates `params` with params.Validate(params_name) (INVALID_ARGUMENT
// naming the field: `params.theta`, `params.rotary_dim`,
// `params.scaling(yarn).factor`, ...; see RopeParams::Validate) and
// computes the frequencies for a request whose largest position is
// seq_len - 1 (seq_len only matters for dynamic and longrope; 0 = no
// positions). `params_name` is what the caller calls the params (the
// server: "rope", its request field).
absl::StatusOr<RopeFrequencies> ComputeRopeFrequencies(const RopeParams& params, int64_t seq_len,
                                                       bool high_precision,
                                                       std::string_view params_name = "params");

}  // namespace vocabd

#endif  // VOCABD_LIB_POSITIONS_ROPE_FREQ_H_
