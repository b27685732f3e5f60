// The RoPE rotation kernel: rotates head rows in place with given cos/sin
// rows. Scalar, AVX2 and AVX-512 versions give bit-identical results (the
// same float32 products and sums, no FMA: this file is compiled with
// -ffp-contract=off), selected at run time from the CPU's features.
//
// Per pair (a, b) with angle cos c, sin s:  a' = a*c - b*s,  b' = b*c + a*s.
//   interleaved: pairs (x[2i], x[2i+1]);  half-split: pairs (x[i], x[i+half]).
#ifndef VOCABD_LIB_POSITIONS_ROPE_KERNEL_H_
#define VOCABD_LIB_POSITIONS_ROPE_KERNEL_H_

#include <cstdint>

namespace vocabd {

enum class RopeIsa { kAuto, kScalar, kAvx2, kAvx512 };

// The best ISA this CPU supports (kAvx512 needs AVX512F, kAvx2 needs AVX2).
RopeIsa DetectRopeIsa();
const char* RopeIsaName(RopeIsa isa);

// Rotates n rows: row j starts at x + j * x_stride (floats) and uses
// cos_rows[j * cs_step] / sin_rows[j * cs_step] ([half] floats each;
// cs_step 0 = one angle row for all n rows). Coordinates past 2 * half
// are untouched.
using RotateRowsFn = void (*)(float* x, int64_t n, int64_t x_stride,
                              const float* const* cos_rows, const float* const* sin_rows,
                              int64_t cs_step, int half);

// kAuto = DetectRopeIsa(); an ISA the CPU lacks falls back to the best one
// it has.
RotateRowsFn GetRotateRows(bool interleaved, RopeIsa isa);

}  // namespace vocabd

#endif  // VOCABD_LIB_POSITIONS_ROPE_KERNEL_H_
