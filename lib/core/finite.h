// Finding NaN / Inf in float inputs (hidden rows, q/k) so requests can be
// refused naming the first bad element.
#ifndef VOCABD_LIB_CORE_FINITE_H_
#define VOCABD_LIB_CORE_FINITE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace vocabd {

// Index of the first element of values[0, n) that is NaN or +-Inf, or -1
// when all are finite (n <= 0 or values null: -1).
int64_t FirstNonFinite(const float* values, int64_t n);

// "[i0, i1, ...]": the coordinates of row-major flat index `flat` in a
// tensor of `dims` (dims all > 0; flat < product(dims)).
std::string NonFiniteIndex(const std::vector<int64_t>& dims, int64_t flat);

}  // namespace vocabd

#endif  // VOCABD_LIB_CORE_FINITE_H_
