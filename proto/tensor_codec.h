// vocabd.v1.Tensor <-> host arrays. Shared by the server (request decoding)
// and the client library (request building, response decoding).
#ifndef VOCABD_PROTO_TENSOR_CODEC_H_
#define VOCABD_PROTO_TENSOR_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/core/dtype.h"
#include "vocabd/v1/tensor.pb.h"

namespace vocabd {

// Wire format (vocabd/v1/tensor.proto): row-major, little-endian, and
//   len(data) == product(shape) * DTypeSize(dtype)   (empty shape = scalar).
// `field` arguments are the request field path used in error messages, e.g.
// "hidden" or "q"; messages look like
//   "hidden: data has 100 bytes but shape [2, 64] x F32 needs 512".

// Proto enum <-> lib enum. `field` names the enum field itself (e.g.
// "output_dtype"). DTYPE_UNSPECIFIED -> INVALID_ARGUMENT
// "<field> is not set (DTYPE_UNSPECIFIED); ..."; a value outside the enum ->
// INVALID_ARGUMENT "<field> = 42 is not a known DType; ...". Callers that
// treat UNSPECIFIED as F32 (output_dtype) must map it before calling.
absl::StatusOr<DType> DTypeFromProto(v1::DType dtype, const std::string& field);
v1::DType DTypeToProto(DType dtype);

// Checks dtype is set and known ("<field>.dtype ..."), dims are >= 0
// ("<field>.shape[1] = -3 is negative ..."), the byte count does not overflow
// int64 ("<field>: shape [...] x F32 overflows ..."), and
// len(data) == product(shape) * sizeof(dtype)
// ("<field>: data has N bytes but shape [...] x F32 needs M").
absl::Status ValidateTensor(const v1::Tensor& tensor, const std::string& field);

// Decodes a floating tensor (F32/F16/BF16) to F32 (exact: every F16/BF16 value
// is representable in F32). INVALID_ARGUMENT for an invalid tensor or an
// integer dtype ("<field>.dtype = I32 is not a floating dtype; ...").
absl::StatusOr<std::vector<float>> DecodeFloatTensor(const v1::Tensor& tensor,
                                                     const std::string& field);
// Decodes an integer tensor (I32/I64) to int64. INVALID_ARGUMENT for an
// invalid tensor or a floating dtype ("<field>.dtype = F32 is not an integer
// dtype; ...").
absl::StatusOr<std::vector<int64_t>> DecodeIntTensor(const v1::Tensor& tensor,
                                                     const std::string& field);

// Encodes F32 values as `dtype` with `shape`. F16/BF16 round to nearest even
// (lib/core/dtype.h ConvertFromF32). I32/I64 (not the intended use) round to
// nearest and saturate. The pointer overload reads product(shape) values
// (none if a dim is negative). The vector overload encodes exactly
// values.size() values and sets `shape` as given, so a mismatch is caught by
// ValidateTensor on the receiving side rather than hidden.
v1::Tensor EncodeFloatTensor(const float* values, const std::vector<int64_t>& shape,
                             DType dtype = DType::kF32);
v1::Tensor EncodeFloatTensor(const std::vector<float>& values, const std::vector<int64_t>& shape,
                             DType dtype = DType::kF32);
// I64 tensor of `values` with `shape` (values encoded as given, see above).
v1::Tensor EncodeInt64Tensor(const std::vector<int64_t>& values, const std::vector<int64_t>& shape);

}  // namespace vocabd

#endif  // VOCABD_PROTO_TENSOR_CODEC_H_
