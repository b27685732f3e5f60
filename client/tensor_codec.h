// vocabd.v1.Tensor <-> host arrays. Shared by the server (request decoding)
// and the client library (request building, response decoding).
#ifndef VOCABD_CLIENT_TENSOR_CODEC_H_
#define VOCABD_CLIENT_TENSOR_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/dtype.h"
#include "vocabd/v1/tensor.pb.h"

namespace vocabd {

// Proto enum <-> lib enum. DTYPE_UNSPECIFIED -> INVALID_ARGUMENT naming
// `field`.
absl::StatusOr<DType> DTypeFromProto(v1::DType dtype, const std::string& field);
v1::DType DTypeToProto(DType dtype);

// Checks dtype is set, dims are >= 0, the element count does not overflow,
// and len(data) == product(shape) * sizeof(dtype). INVALID_ARGUMENT names
// `field` and the offending shape/length.
absl::Status ValidateTensor(const v1::Tensor& tensor, const std::string& field);

// Decodes a floating tensor (F32/F16/BF16) to F32. INVALID_ARGUMENT for
// integer dtypes (named) or an invalid tensor.
absl::StatusOr<std::vector<float>> DecodeFloatTensor(const v1::Tensor& tensor,
                                                     const std::string& field);
// Decodes an integer tensor (I32/I64) to int64.
absl::StatusOr<std::vector<int64_t>> DecodeIntTensor(const v1::Tensor& tensor,
                                                     const std::string& field);

// Encodes F32 values as `dtype` (F32/F16/BF16) with `shape`.
v1::Tensor EncodeFloatTensor(const float* values, const std::vector<int64_t>& shape,
                             DType dtype = DType::kF32);
v1::Tensor EncodeFloatTensor(const std::vector<float>& values, const std::vector<int64_t>& shape,
                             DType dtype = DType::kF32);
v1::Tensor EncodeInt64Tensor(const std::vector<int64_t>& values, const std::vector<int64_t>& shape);

}  // namespace vocabd

#endif  // VOCABD_CLIENT_TENSOR_CODEC_H_
