#include "lib/head/quant_kernel.h"

#include <algorithm>
#include <cpuid.h>
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "lib/head/quant_kernel_impl.h"

namespace vocabd {

const char* QuantKernelIsaName(QuantKernelIsa isa) {
  switch (isa) {
    case QuantKernelIsa::kScalar: return "scalar";
    case QuantKernelIsa::kAvx2: return "avx2";
    case QuantKernelIsa::kAvxVnni: return "avxvnni";
    case QuantKernelIsa::kAvx512Vnni: return "avx512vnni";
  }
  return "?";
}

namespace {

// F16C (CPUID.1:ECX bit 29) and AVX-VNNI (CPUID.(EAX=7,ECX=1):EAX bit 4)
// read from CPUID directly: clang < 16 (the fuzz build's Debian clang 14)
// has no "f16c" / "avxvnni" strings for __builtin_cpu_supports. The OS
// state check (XCR0 YMM) comes with __builtin_cpu_supports("avx2").
bool CpuidF16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & (1u << 29)) != 0;
}
// GFNI: CPUID.(EAX=7,ECX=0):ECX bit 8 (the packed kernels' few-row decode).
bool CpuidGfni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) != 0 && (c & (1u << 8)) != 0;
}
bool CpuidAvxVnni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) != 0 && (a & (1u << 4)) != 0;
}

// Which paths this CPU runs, read once: CPUID is a VM exit under a
// hypervisor (about 3 us each on KVM), and the packed kernel's entry checks
// QuantPackedCovers once per vocabulary chunk (hundreds per call).
struct IsaSupport {
  bool avx2 = false, avxvnni = false, avx512vnni = false, gfni = false;
};
const IsaSupport& Support() {
  static const IsaSupport support = [] {
    __builtin_cpu_init();
    IsaSupport s;
    s.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && CpuidF16c();
    s.avxvnni = s.avx2 && CpuidAvxVnni();
    s.avx512vnni = s.avx2 && __builtin_cpu_supports("avx512f") &&
                   __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
                   __builtin_cpu_supports("avx512vnni");
    s.gfni = CpuidGfni();
    return s;
  }();
  return support;
}

}  // namespace

bool QuantKernelIsaSupported(QuantKernelIsa isa) {
  const IsaSupport& s = Support();
  switch (isa) {
    case QuantKernelIsa::kScalar: return true;
    case QuantKernelIsa::kAvx2: return s.avx2;
    case QuantKernelIsa::kAvxVnni: return s.avxvnni;
    case QuantKernelIsa::kAvx512Vnni: return s.avx512vnni;
  }
  return false;
}

QuantKernelIsa DetectQuantKernelIsa() {
  for (QuantKernelIsa isa :
       {QuantKernelIsa::kAvx512Vnni, QuantKernelIsa::kAvxVnni, QuantKernelIsa::kAvx2}) {
    if (QuantKernelIsaSupported(isa)) return isa;
  }
  return QuantKernelIsa::kScalar;
}

const QuantTypeInfo* FindQuantTypeInfo(quant::GgmlType type) {
  using quant::GgmlType;
  static constexpr QuantTypeInfo kTypes[] = {
      {GgmlType::kQ8_0, "Q8_0", 32, 34},     {GgmlType::kQ4_0, "Q4_0", 32, 18},
      {GgmlType::kQ4_1, "Q4_1", 32, 20},      {GgmlType::kQ5_0, "Q5_0", 32, 22},
      {GgmlType::kQ5_1, "Q5_1", 32, 24},      {GgmlType::kIQ4_NL, "IQ4_NL", 32, 18},
      {GgmlType::kQ2_K, "Q2_K", 256, 84},     {GgmlType::kQ3_K, "Q3_K", 256, 110},
      {GgmlType::kQ4_K, "Q4_K", 256, 144},    {GgmlType::kQ5_K, "Q5_K", 256, 176},
      {GgmlType::kQ6_K, "Q6_K", 256, 210},
  };
  for (const QuantTypeInfo& info : kTypes) {
    if (info.type == type) return &info;
  }
  return nullptr;
}

int64_t QuantActRowBytes(int64_t d) { return ActLayout(d).bytes; }
int64_t QuantUnpackScratchBytes(int64_t d) {
  const int64_t a = UnpackLayout(d).bytes();
  const int64_t b = quant_kernel_internal::Avx512GemmScratchBytes(d);
  return a > b ? a : b;
}
int64_t QuantPackedPanelBytes(int64_t rows, int64_t d) {
  return rows * (d / 32) * kPackedPanelBytesPer32 + 64;
}

void QuantizeActivations(const float* x, int64_t rows, int64_t d, uint8_t* acts) {
  if (Support().avx512vnni) {
    quant_kernel_internal::Avx512QuantizeActivations(x, rows, d, acts);
  } else {
    quant_kernel_internal::QuantizeActivationsScalar(x, rows, d, acts);
  }
}

void quant_kernel_internal::QuantizeActivationsScalar(const float* x, int64_t rows, int64_t d,
                                                      uint8_t* acts) {
  const ActLayout al(d);
  for (int64_t m = 0; m < rows; ++m) {
    const float* xr = x + m * d;
    uint8_t* row = acts + m * al.bytes;
    auto* aq = reinterpret_cast<int8_t*>(row);
    const ActRowSums sums(row, al);
    for (int64_t b = 0; b < d / 32; ++b) {
      const float* xb = xr + 32 * b;
      float amax = 0.0f;
      bool finite = true;
      for (int i = 0; i < 32; ++i) {
        amax = std::fmax(amax, std::fabs(xb[i]));
        finite = finite && std::isfinite(xb[i]);
      }
      // As ggml quantize_row_q8_0: da = amax / 127, codes round(x / da).
      // A NaN or infinity makes the block's scale NaN (codes 0), so the
      // row's logits come out NaN, as with F32 weights, not silently finite.
      const float scale = finite ? amax / 127.0f : std::nanf("");
      // 127 / amax overflows below amax = 127 / FLT_MAX (about 2^-121): such
      // a block is scaled by 2^64 first. x * 2^64 and amax * 2^64 are exact,
      // so wherever 127 / amax is finite the codes are the same either way.
      const float pre = amax < 0x1p-64f ? 0x1p64f : 1.0f;
      const float inv = finite && amax > 0.0f ? 127.0f / (amax * pre) : 0.0f;
      int32_t isum[2] = {0, 0};
      for (int i = 0; i < 32; ++i) {
        // Codes are 0 in a non-finite block (NaN * 0 is NaN: no conversion of it).
        const int q = finite ? static_cast<int>(std::nearbyint((xb[i] * pre) * inv)) : 0;
        aq[32 * b + i] = static_cast<int8_t>(q);
        isum[i / 16] += q;
      }
      sums.Put(b, scale, isum[0], isum[1]);
    }
  }
}

void QuantHeadKernel(QuantKernelIsa isa, const QuantTypeInfo& type, const uint8_t* acts,
                     int64_t rows, const uint8_t* w, int64_t d, int64_t v0, int64_t v1,
                     float* out, int64_t ldo, uint8_t* scratch, int64_t few_rows_max) {
  using namespace quant_kernel_internal;
  KernelFn fn = KernelScalar;
  switch (isa) {
    case QuantKernelIsa::kScalar: fn = KernelScalar; break;
    case QuantKernelIsa::kAvx2: fn = KernelAvx2; break;
    case QuantKernelIsa::kAvxVnni: fn = KernelAvxVnni; break;
    case QuantKernelIsa::kAvx512Vnni: fn = KernelAvx512Vnni; break;
  }
  fn(type, acts, rows, w, d, v0, v1, out, ldo, scratch, few_rows_max);
}

bool QuantKernelHasCrossover(QuantKernelIsa isa, quant::GgmlType type, int64_t d) {
  switch (isa) {
    case QuantKernelIsa::kAvx512Vnni: return true;
    case QuantKernelIsa::kAvx2:
    case QuantKernelIsa::kAvxVnni: return quant_kernel_internal::Avx2FusedCovers(type, d);
    default: return false;
  }
}

namespace {
// Bytes of one packed record of `type` (16 rows x 256 codes); 0: no packed kernel.
int64_t PackedRecordBytes(quant::GgmlType type) {
  using namespace quant_kernel_internal;
  switch (type) {
    case quant::GgmlType::kQ8_0: return kPackedRecordBytesQ8_0;
    case quant::GgmlType::kQ4_K: return kPackedRecordBytesQ4_K;
    case quant::GgmlType::kQ6_K: return kPackedRecordBytesQ6_K;
    case quant::GgmlType::kQ4_0: return kPackedRecordBytesQ4_0;
    case quant::GgmlType::kQ4_1: return kPackedRecordBytesQ4_1;
    case quant::GgmlType::kQ5_0: return kPackedRecordBytesQ5_0;
    case quant::GgmlType::kQ5_1: return kPackedRecordBytesQ5_1;
    case quant::GgmlType::kIQ4_NL: return kPackedRecordBytesIQ4_NL;
    case quant::GgmlType::kQ5_K: return kPackedRecordBytesQ5_K;
    case quant::GgmlType::kQ2_K: return kPackedRecordBytesQ2_K;
    case quant::GgmlType::kQ3_K: return kPackedRecordBytesQ3_K;
    default: return 0;
  }
}
}  // namespace

bool QuantPackedCovers(QuantKernelIsa isa, quant::GgmlType type, int64_t d) {
  return isa == QuantKernelIsa::kAvx512Vnni && d > 0 && d % 256 == 0 &&
         PackedRecordBytes(type) > 0 && QuantKernelIsaSupported(isa);
}

int64_t QuantPackedBytes(const QuantTypeInfo& type, int64_t vocab, int64_t d) {
  const int64_t groups = (vocab + kPackedGroupRows - 1) / kPackedGroupRows;
  return groups * (d / 256) * PackedRecordBytes(type.type);
}

void QuantPackGroups(QuantKernelIsa isa, const QuantTypeInfo& type, const uint8_t* w,
                     int64_t vocab, int64_t d, int64_t g0, int64_t g1, uint8_t* packed) {
  if (!QuantPackedCovers(isa, type.type, d)) return;  // LmHead packs only what is covered
  quant_kernel_internal::Avx512PackGroups(type, w, vocab, d, g0, g1, packed);
}

void QuantBuildPackedPanel(QuantKernelIsa isa, const QuantTypeInfo& type, const uint8_t* acts,
                           int64_t rows, int64_t d, uint8_t* panel) {
  if (!QuantPackedCovers(isa, type.type, d)) return;
  quant_kernel_internal::Avx512BuildPanels(type, acts, rows, d, panel);
}

void QuantPackedKernel(QuantKernelIsa isa, const QuantTypeInfo& type, const uint8_t* panel,
                       int64_t rows, const uint8_t* packed, int64_t vocab, int64_t d, int64_t v0,
                       int64_t v1, float* out, int64_t ldo, int prefetch_records,
                       int gf_rows_max) {
  if (!QuantPackedCovers(isa, type.type, d)) return;
  prefetch_records = std::clamp(prefetch_records, 0, kPackedPrefetchMax);
  gf_rows_max = Support().gfni ? std::clamp(gf_rows_max, 0, kPackedGfRowsMax) : 0;
  quant_kernel_internal::Avx512PackedKernel(type, panel, rows, packed, d, v0, v1, out, ldo,
                                            prefetch_records, gf_rows_max);
}

bool QuantCpuHasGfni() { return Support().gfni; }

}  // namespace vocabd
