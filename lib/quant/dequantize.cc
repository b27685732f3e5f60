#include "lib/quant/dequantize.h"

#include <cstring>

#include "lib/core/dtype.h"
#include "lib/quant/ggml_types.h"

namespace vocabd::quant {
namespace {

template <typename Block>
Block Load(const uint8_t* p) {
  Block b;
  std::memcpy(&b, p, sizeof(Block));
  return b;
}

float H(ggml_half h) { return HalfToFloat(h); }

// Legacy 32-element blocks: qs[j] low nibble is element j, high nibble
// element j + 16.
void Q4_0(const BlockQ4_0& b, float* y) {
  const float d = H(b.d);
  for (int j = 0; j < kQK / 2; ++j) {
    const int x0 = (b.qs[j] & 0x0F) - 8;
    const int x1 = (b.qs[j] >> 4) - 8;
    y[j] = static_cast<float>(x0) * d;
    y[j + kQK / 2] = static_cast<float>(x1) * d;
  }
}

void Q4_1(const BlockQ4_1& b, float* y) {
  const float d = H(b.d), m = H(b.m);
  for (int j = 0; j < kQK / 2; ++j) {
    const int x0 = b.qs[j] & 0x0F;
    const int x1 = b.qs[j] >> 4;
    y[j] = static_cast<float>(x0) * d + m;
    y[j + kQK / 2] = static_cast<float>(x1) * d + m;
  }
}

// 5th bit of element j is bit j of qh (j < 16 low nibbles, j + 16 high).
void Q5_0(const BlockQ5_0& b, float* y) {
  const float d = H(b.d);
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int j = 0; j < kQK / 2; ++j) {
    const uint8_t h0 = static_cast<uint8_t>(((qh >> j) << 4) & 0x10);
    const uint8_t h1 = static_cast<uint8_t>((qh >> (j + 12)) & 0x10);
    const int x0 = ((b.qs[j] & 0x0F) | h0) - 16;
    const int x1 = ((b.qs[j] >> 4) | h1) - 16;
    y[j] = static_cast<float>(x0) * d;
    y[j + kQK / 2] = static_cast<float>(x1) * d;
  }
}

void Q5_1(const BlockQ5_1& b, float* y) {
  const float d = H(b.d), m = H(b.m);
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int j = 0; j < kQK / 2; ++j) {
    const uint8_t h0 = static_cast<uint8_t>(((qh >> j) << 4) & 0x10);
    const uint8_t h1 = static_cast<uint8_t>((qh >> (j + 12)) & 0x10);
    const int x0 = (b.qs[j] & 0x0F) | h0;
    const int x1 = (b.qs[j] >> 4) | h1;
    y[j] = static_cast<float>(x0) * d + m;
    y[j + kQK / 2] = static_cast<float>(x1) * d + m;
  }
}

void Q8_0(const BlockQ8_0& b, float* y) {
  const float d = H(b.d);
  for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}

void IQ4_NL(const BlockIQ4_NL& b, float* y) {
  const float d = H(b.d);
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = d * static_cast<float>(kValuesIQ4_NL[b.qs[j] & 0x0F]);
    y[j + kQK / 2] = d * static_cast<float>(kValuesIQ4_NL[b.qs[j] >> 4]);
  }
}

// q2_K: two halves of 128; in each, 4 shifts (0, 2, 4, 6) over qs[32 * half
// + l], each giving two sub-blocks of 16 (l < 16, l >= 16).
void Q2_K(const BlockQ2_K& b, float* y) {
  const float d = H(b.d), dmin = H(b.dmin);
  const uint8_t* q = b.qs;
  int is = 0;
  for (int n = 0; n < kQK_K; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = b.scales[is++];
        const float dl = d * static_cast<float>(sc & 0x0F);
        const float ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) {
          const int v = (q[l + 16 * half] >> shift) & 3;
          *y++ = dl * static_cast<float>(v) - ml;
        }
      }
    }
    q += 32;
  }
}

// The 16 6-bit scales of q3_K: low 4 bits from bytes 0..7 (low nibbles for
// scales 0..7, high nibbles for 8..15), high 2 bits from bytes 8..11
// (scale i takes bits 2 * (i / 4) .. +1 of byte 8 + i % 4).
void Q3KScales(const uint8_t packed[12], int out[16]) {
  for (int i = 0; i < 16; ++i) {
    const int low = i < 8 ? (packed[i] & 0x0F) : (packed[i - 8] >> 4);
    const int high = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
    out[i] = (low | (high << 4)) - 32;
  }
}

void Q3_K(const BlockQ3_K& b, float* y) {
  const float d_all = H(b.d);
  int scales[16];
  Q3KScales(b.scales, scales);
  const uint8_t* q = b.qs;
  uint8_t m = 1;
  int is = 0;
  for (int n = 0; n < kQK_K; n += 128) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d_all * static_cast<float>(scales[is++]);
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          const int v = ((q[l] >> shift) & 3) - ((b.hmask[l] & m) ? 0 : 4);
          *y++ = dl * static_cast<float>(v);
        }
      }
      m = static_cast<uint8_t>(m << 1);
    }
    q += 32;
  }
}

// ggml get_scale_min_k4: 8 (scale, min) pairs of 6 bits in 12 bytes.
void ScaleMinK4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// q4_K: 4 chunks of 64; chunk c: low nibbles of qs[32 c ..] with pair 2c,
// high nibbles with pair 2c + 1.
void Q4_K(const BlockQ4_K& b, float* y) {
  const float d = H(b.d), dmin = H(b.dmin);
  const uint8_t* q = b.qs;
  for (int is = 0; is < 8; is += 2) {
    int sc, m;
    ScaleMinK4(is, b.scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    ScaleMinK4(is + 1, b.scales, &sc, &m);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0x0F) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    q += 32;
  }
}

// q5_K: as q4_K; the 5th bit of chunk c's low half is bit 2c of qh[l], of
// its high half bit 2c + 1.
void Q5_K(const BlockQ5_K& b, float* y) {
  const float d = H(b.d), dmin = H(b.dmin);
  const uint8_t* ql = b.qs;
  uint8_t u1 = 1, u2 = 2;
  for (int is = 0; is < 8; is += 2) {
    int sc, m;
    ScaleMinK4(is, b.scales, &sc, &m);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
    ScaleMinK4(is + 1, b.scales, &sc, &m);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const int v = (ql[l] & 0x0F) + ((b.qh[l] & u1) ? 16 : 0);
      *y++ = d1 * static_cast<float>(v) - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const int v = (ql[l] >> 4) + ((b.qh[l] & u2) ? 16 : 0);
      *y++ = d2 * static_cast<float>(v) - m2;
    }
    ql += 32;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

// q6_K: two halves of 128 elements; half h uses ql[64 h .. +64],
// qh[32 h .. +32], scales[8 h .. +8]. Element l + 32 k (l < 32, k < 4):
// low 4 bits from ql[l] (k even: low nibble; k = 0,1 -> ql[l], ql[l + 32];
// k = 2,3 -> high nibbles), 2 high bits from qh[l] >> 2k, scale
// scales[l / 16 + 2 k].
void Q6_K(const BlockQ6_K& b, float* y) {
  const float d = H(b.d);
  const uint8_t* ql = b.ql;
  const uint8_t* qh = b.qh;
  const int8_t* sc = b.scales;
  for (int n = 0; n < kQK_K; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

template <typename Block, void (*Fn)(const Block&, float*)>
void Rows(const uint8_t* src, int64_t blocks, int64_t block_size, float* dst) {
  for (int64_t i = 0; i < blocks; ++i) {
    Fn(Load<Block>(src + i * static_cast<int64_t>(sizeof(Block))), dst + i * block_size);
  }
}

}  // namespace

bool DequantizeRow(GgmlType type, const void* src_void, int64_t n, float* dst) {
  if (!IsServedType(type) || RowBytes(type, n) < 0) return false;
  const auto* src = static_cast<const uint8_t*>(src_void);
  const int64_t bs = TypeInfo(type).block_size;
  const int64_t blocks = n / bs;
  switch (type) {
    case GgmlType::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return true;
    case GgmlType::kF16: ConvertToF32(DType::kF16, src, static_cast<size_t>(n), dst); return true;
    case GgmlType::kBF16: ConvertToF32(DType::kBF16, src, static_cast<size_t>(n), dst); return true;
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
