#include "lib/quant/quantize.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "lib/core/dtype.h"
#include "lib/quant/ggml_types.h"

namespace vocabd::quant {
namespace {

ggml_half F16(float f) { return FloatToHalf(f); }

template <typename Block>
void Store(const Block& b, uint8_t* p) {
  std::memcpy(p, &b, sizeof(Block));
}

// The signed value of largest magnitude (the first one on ties), as ggml's
// legacy references pick `max`.
float SignedAbsMax(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

void MinMax(const float* x, int n, float* min, float* max) {
  *min = FLT_MAX;
  *max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < *min) *min = x[j];
    if (x[j] > *max) *max = x[j];
  }
}

int Clamp(int v, int lo, int hi) { return std::min(hi, std::max(lo, v)); }
int RoundInt(float v) { return std::isfinite(v) ? static_cast<int>(std::lround(v)) : 0; }

BlockQ8_0 Q8_0(const float* x) {
  BlockQ8_0 b;
  float amax = 0.0f;
  for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = F16(d);
  for (int j = 0; j < kQK; ++j) b.qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  return b;
}

BlockQ4_0 Q4_0(const float* x) {
  BlockQ4_0 b;
  const float d = SignedAbsMax(x, kQK) / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = F16(d);
  for (int j = 0; j < kQK / 2; ++j) {
    const int x0 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j] * id + 8.5f)));
    const int x1 = std::min(15, static_cast<int>(static_cast<int8_t>(x[j + kQK / 2] * id + 8.5f)));
    b.qs[j] = static_cast<uint8_t>(x0 | (x1 << 4));
  }
  return b;
}

BlockQ4_1 Q4_1(const float* x) {
  BlockQ4_1 b;
  float min, max;
  MinMax(x, kQK, &min, &max);
  const float d = (max - min) / 15.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = F16(d);
  b.m = F16(min);
  for (int j = 0; j < kQK / 2; ++j) {
    const int x0 = std::min(15, static_cast<int>(static_cast<int8_t>((x[j] - min) * id + 0.5f)));
    const int x1 =
        std::min(15, static_cast<int>(static_cast<int8_t>((x[j + kQK / 2] - min) * id + 0.5f)));
    b.qs[j] = static_cast<uint8_t>(x0 | (x1 << 4));
  }
  return b;
}

void PackQ5(const int* q, uint8_t* qs, uint8_t qh_bytes[4]) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    const int x0 = q[j], x1 = q[j + kQK / 2];
    qs[j] = static_cast<uint8_t>((x0 & 0x0F) | ((x1 & 0x0F) << 4));
    qh |= static_cast<uint32_t>((x0 & 0x10) >> 4) << j;
    qh |= static_cast<uint32_t>((x1 & 0x10) >> 4) << (j + kQK / 2);
  }
  std::memcpy(qh_bytes, &qh, 4);
}

BlockQ5_0 Q5_0(const float* x) {
  BlockQ5_0 b;
  const float d = SignedAbsMax(x, kQK) / -16.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = F16(d);
  int q[kQK];
  for (int j = 0; j < kQK; ++j) {
    q[j] = std::min(31, static_cast<int>(static_cast<int8_t>(x[j] * id + 16.5f)));
  }
  PackQ5(q, b.qs, b.qh);
  return b;
}

BlockQ5_1 Q5_1(const float* x) {
  BlockQ5_1 b;
  float min, max;
  MinMax(x, kQK, &min, &max);
  const float d = (max - min) / 31.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = F16(d);
  b.m = F16(min);
  int q[kQK];
  for (int j = 0; j < kQK; ++j) {
    q[j] = std::min(31, static_cast<int>(static_cast<uint8_t>((x[j] - min) * id + 0.5f)));
  }
  PackQ5(q, b.qs, b.qh);
  return b;
}

BlockIQ4_NL IQ4_NL(const float* x) {
  BlockIQ4_NL b;
  const float d = SignedAbsMax(x, kQK) / static_cast<float>(kValuesIQ4_NL[0]);
  b.d = F16(d);
  const float dq = HalfToFloat(b.d);
  uint8_t q[kQK];
  for (int j = 0; j < kQK; ++j) {
    int best = 0;
    float best_err = FLT_MAX;
    for (int k = 0; k < 16; ++k) {
      const float err = std::fabs(dq * static_cast<float>(kValuesIQ4_NL[k]) - x[j]);
      if (err < best_err) {
        best_err = err;
        best = k;
      }
    }
    q[j] = static_cast<uint8_t>(best);
  }
  for (int j = 0; j < kQK / 2; ++j) b.qs[j] = static_cast<uint8_t>(q[j] | (q[j + kQK / 2] << 4));
  return b;
}

// Scale + min k-quants: per sub-block of `sub` values, x ~ d*sc*q - dmin*m.
// Writes the codes L[256] (0..levels), scales sc[] and mins m[] (0..smax),
// and the super-block d, dmin.
void ScaleMinQuants(const float* x, int sub, int levels, int smax, int* L, int* sc, int* m,
                    ggml_half* d_out, ggml_half* dmin_out) {
  const int nsub = kQK_K / sub;
  float scales[16], mins[16];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int i = 0; i < nsub; ++i) {
    float mn, mx;
    MinMax(x + i * sub, sub, &mn, &mx);
    mn = std::min(mn, 0.0f);
    scales[i] = (mx - mn) / static_cast<float>(levels);
    mins[i] = -mn;
    max_scale = std::max(max_scale, scales[i]);
    max_min = std::max(max_min, mins[i]);
  }
  const float d = max_scale / static_cast<float>(smax);
  const float dmin = max_min / static_cast<float>(smax);
  *d_out = F16(d);
  *dmin_out = F16(dmin);
  const float dq = HalfToFloat(*d_out), dminq = HalfToFloat(*dmin_out);
  for (int i = 0; i < nsub; ++i) {
    sc[i] = dq > 0.0f ? Clamp(RoundInt(scales[i] / dq), 0, smax) : 0;
    m[i] = dminq > 0.0f ? Clamp(RoundInt(mins[i] / dminq), 0, smax) : 0;
    const float dl = dq * static_cast<float>(sc[i]);
    const float ml = dminq * static_cast<float>(m[i]);
    for (int j = 0; j < sub; ++j) {
      L[i * sub + j] = dl > 0.0f ? Clamp(RoundInt((x[i * sub + j] + ml) / dl), 0, levels) : 0;
    }
  }
}

// Symmetric k-quants: per sub-block of 16, x ~ d * sc * q, q in
// [-half_levels, half_levels - 1], sc in [-smax - 1, smax].
void SymmetricQuants(const float* x, int half_levels, int smax, int* L, int* sc, float* d_out) {
  float scales[16];
  float max_scale = 0.0f, amax = 0.0f;
  for (int i = 0; i < 16; ++i) {
    scales[i] = SignedAbsMax(x + 16 * i, 16) / -static_cast<float>(half_levels);
    if (std::fabs(scales[i]) > amax) {
      amax = std::fabs(scales[i]);
      max_scale = scales[i];
    }
  }
  const float iscale = max_scale != 0.0f ? -static_cast<float>(smax + 1) / max_scale : 0.0f;
  *d_out = iscale != 0.0f ? 1.0f / iscale : 0.0f;
  const float dq = HalfToFloat(F16(*d_out));
  for (int i = 0; i < 16; ++i) {
    sc[i] = Clamp(RoundInt(iscale * scales[i]), -smax - 1, smax);
    const float dl = dq * static_cast<float>(sc[i]);
    for (int j = 0; j < 16; ++j) {
      L[16 * i + j] = dl != 0.0f ? Clamp(RoundInt(x[16 * i + j] / dl), -half_levels,
                                         half_levels - 1)
                                 : 0;
    }
  }
}

// 2-bit codes of 256 values into 64 bytes (q2_K, q3_K low bits).
void Pack2Bits(const int* L, uint8_t* qs) {
  for (int j = 0; j < kQK_K; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) |
                                           (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
  }
}

BlockQ2_K Q2_K(const float* x) {
  BlockQ2_K b;
  int L[kQK_K], sc[16], m[16];
  ScaleMinQuants(x, 16, 3, 15, L, sc, m, &b.d, &b.dmin);
  for (int i = 0; i < 16; ++i) b.scales[i] = static_cast<uint8_t>(sc[i] | (m[i] << 4));
  Pack2Bits(L, b.qs);
  return b;
}

BlockQ3_K Q3_K(const float* x) {
  BlockQ3_K b;
  int L[kQK_K], sc[16];
  float d;
  SymmetricQuants(x, 4, 31, L, sc, &d);
  b.d = F16(d);
  std::memset(b.scales, 0, sizeof(b.scales));
  for (int i = 0; i < 16; ++i) {
    const int l = sc[i] + 32;
    if (i < 8) {
      b.scales[i] = static_cast<uint8_t>(b.scales[i] | (l & 0x0F));
    } else {
      b.scales[i - 8] = static_cast<uint8_t>(b.scales[i - 8] | ((l & 0x0F) << 4));
    }
    b.scales[8 + i % 4] = static_cast<uint8_t>(b.scales[8 + i % 4] | ((l >> 4) << (2 * (i / 4))));
  }
  std::memset(b.hmask, 0, sizeof(b.hmask));
  for (int j = 0; j < kQK_K; ++j) {
    L[j] += 4;  // 0..7
    if (L[j] > 3) {
      b.hmask[j % 32] = static_cast<uint8_t>(b.hmask[j % 32] | (1 << (j / 32)));
      L[j] -= 4;
    }
  }
  Pack2Bits(L, b.qs);
  return b;
}

void PackScaleMinK4(const int* sc, const int* m, uint8_t* scales) {
  std::memset(scales, 0, kKScaleSize);
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] = static_cast<uint8_t>(sc[j]);
      scales[j + 4] = static_cast<uint8_t>(m[j]);
    } else {
      scales[j + 4] = static_cast<uint8_t>((sc[j] & 0x0F) | ((m[j] & 0x0F) << 4));
      scales[j - 4] = static_cast<uint8_t>(scales[j - 4] | ((sc[j] >> 4) << 6));
      scales[j] = static_cast<uint8_t>(scales[j] | ((m[j] >> 4) << 6));
    }
  }
}

BlockQ4_K Q4_K(const float* x) {
  BlockQ4_K b;
  int L[kQK_K], sc[8], m[8];
  ScaleMinQuants(x, 32, 15, 63, L, sc, m, &b.d, &b.dmin);
  PackScaleMinK4(sc, m, b.scales);
  for (int j = 0; j < kQK_K; j += 64) {
    for (int l = 0; l < 32; ++l) b.qs[j / 2 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
  return b;
}

BlockQ5_K Q5_K(const float* x) {
  BlockQ5_K b;
  int L[kQK_K], sc[8], m[8];
  ScaleMinQuants(x, 32, 31, 63, L, sc, m, &b.d, &b.dmin);
  PackScaleMinK4(sc, m, b.scales);
  std::memset(b.qh, 0, sizeof(b.qh));
  uint8_t m1 = 1, m2 = 2;
  for (int n = 0; n < kQK_K; n += 64) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[n + j], l2 = L[n + j + 32];
      if (l1 > 15) {
        l1 -= 16;
        b.qh[j] = static_cast<uint8_t>(b.qh[j] | m1);
      }
      if (l2 > 15) {
        l2 -= 16;
        b.qh[j] = static_cast<uint8_t>(b.qh[j] | m2);
      }
      b.qs[n / 2 + j] = static_cast<uint8_t>(l1 | (l2 << 4));
    }
    m1 = static_cast<uint8_t>(m1 << 2);
    m2 = static_cast<uint8_t>(m2 << 2);
  }
  return b;
}

BlockQ6_K Q6_K(const float* x) {
  BlockQ6_K b;
  int L[kQK_K], sc[16];
  float d;
  SymmetricQuants(x, 32, 127, L, sc, &d);
  b.d = F16(d);
  for (int i = 0; i < 16; ++i) b.scales[i] = static_cast<int8_t>(sc[i]);
  for (int j = 0; j < kQK_K; ++j) L[j] += 32;  // 0..63
  uint8_t* ql = b.ql;
  uint8_t* qh = b.qh;
  for (int j = 0; j < kQK_K; j += 128) {
    for (int l = 0; l < 32; ++l) {
      const int q1 = L[j + l] & 0x0F, q2 = L[j + l + 32] & 0x0F;
      const int q3 = L[j + l + 64] & 0x0F, q4 = L[j + l + 96] & 0x0F;
      ql[l] = static_cast<uint8_t>(q1 | (q3 << 4));
      ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
      qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                   ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
    }
    ql += 64;
    qh += 32;
  }
  return b;
}

template <typename Block, Block (*Fn)(const float*)>
void Rows(const float* src, int64_t blocks, int64_t block_size, uint8_t* dst) {
  for (int64_t i = 0; i < blocks; ++i) {
    Store(Fn(src + i * block_size), dst + i * static_cast<int64_t>(sizeof(Block)));
  }
}

}  // namespace

bool QuantizeRow(GgmlType type, const float* src, int64_t n, void* dst_void) {
  if (!IsServedType(type) || RowBytes(type, n) < 0) return false;
  auto* dst = static_cast<uint8_t*>(dst_void);
  const int64_t bs = TypeInfo(type).block_size;
  const int64_t blocks = n / bs;
  switch (type) {
    case GgmlType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return true;
    case GgmlType::kF16: ConvertFromF32(src, static_cast<size_t>(n), DType::kF16, dst); return true;
    case GgmlType::kBF16: ConvertFromF32(src, static_cast<size_t>(n), DType::kBF16, dst); return true;
    case GgmlType::kQ4_0: Rows<BlockQ4_0, Q4_0>(src, blocks, bs, dst); return true;
    case GgmlType::kQ4_1: Rows<BlockQ4_1, Q4_1>(src, blocks, bs, dst); return true;
    case GgmlType::kQ5_0: Rows<BlockQ5_0, Q5_0>(src, blocks, bs, dst); return true;
    case GgmlType::kQ5_1: Rows<BlockQ5_1, Q5_1>(src, blocks, bs, dst); return true;
    case GgmlType::kQ8_0: Rows<BlockQ8_0, Q8_0>(src, blocks, bs, dst); return true;
    case GgmlType::kIQ4_NL: Rows<BlockIQ4_NL, IQ4_NL>(src, blocks, bs, dst); return true;
    case GgmlType::kQ2_K: Rows<BlockQ2_K, Q2_K>(src, blocks, bs, dst); return true;
    case GgmlType::kQ3_K: Rows<BlockQ3_K, Q3_K>(src, blocks, bs, dst); return true;
    case GgmlType::kQ4_K: Rows<BlockQ4_K, Q4_K>(src, blocks, bs, dst); return true;
    case GgmlType::kQ5_K: Rows<BlockQ5_K, Q5_K>(src, blocks, bs, dst); return true;
    case GgmlType::kQ6_K: Rows<BlockQ6_K, Q6_K>(src, blocks, bs, dst); return true;
    case GgmlType::kQ8_1:
    case GgmlType::kQ8_K:
      break;
  }
  return false;
}

}  // namespace vocabd::quant
