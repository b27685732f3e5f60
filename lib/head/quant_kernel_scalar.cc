// The scalar path of the quantized LM-head kernel (quant_kernel.h): the
// reference the SIMD paths are tested against. Built without ISA flags.
#include <cstdint>

#include "lib/head/quant_kernel.h"
#include "lib/head/quant_kernel_impl.h"

namespace vocabd {
namespace {

struct Scalar {
  static void Unpack(quant::GgmlType type, const uint8_t* row, int64_t d, uint8_t* u, float* dw,
                     float* mw) {
    UnpackRow(type, row, d, u, dw, mw);
  }
  static constexpr int kMaxMb = 1;
  // Per (v, m): sum over sub-blocks of 16 of dw * da * (exact int dot),
  // plus sum of mw * S, in index order.
  template <int R, int MB>
  static void Tile(const TileArgs& t) {
    const ActLayout al(t.d);
    const int64_t nj = t.d / 16;
    for (int m = 0; m < MB; ++m) {
      const auto* aq = reinterpret_cast<const int8_t*>(t.act[m]);
      const auto* da = reinterpret_cast<const float*>(t.act[m] + al.da);
      const auto* sums = reinterpret_cast<const float*>(t.act[m] + t.min_sums);
      for (int r = 0; r < R; ++r) {
        float acc = 0.0f, macc = 0.0f;
        for (int64_t j = 0; j < nj; ++j) {
          int32_t dot = 0;
          for (int i = 0; i < 16; ++i) dot += t.u[r][16 * j + i] * aq[16 * j + i];
          acc += t.dw[r][j] * da[j / 2] * static_cast<float>(dot);
          macc += t.mw[r][j] * sums[j];
        }
        t.out[m][r] = acc + macc;
      }
    }
  }
};

}  // namespace

namespace quant_kernel_internal {
void KernelScalar(const QuantTypeInfo& type, const uint8_t* acts, int64_t rows, const uint8_t* w,
                  int64_t d, int64_t v0, int64_t v1, float* out, int64_t ldo, uint8_t* scratch,
                  int64_t /*few_rows_max: one kernel*/) {
  RunKernel<Scalar>(type, acts, rows, w, d, v0, v1, out, ldo, scratch);
}
}  // namespace quant_kernel_internal
}  // namespace vocabd
