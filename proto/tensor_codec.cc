#include "proto/tensor_codec.h"

#include <bit>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "lib/core/shape.h"
#include "lib/core/status_macros.h"

namespace vocabd {

static_assert(std::endian::native == std::endian::little,
              "tensor_codec copies little-endian wire bytes directly");

namespace {

// Debian's abseil does not alias absl::string_view to std::string_view.
std::string Name(DType dtype) { return std::string(DTypeName(dtype)); }

bool IsFloating(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

// Product of `shape` (1 for a scalar); -1 when a dim is negative or the
// product overflows int64.
int64_t ProductOf(absl::Span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return -1;
  }
  return n;
}

void SetShape(const std::vector<int64_t>& shape, v1::Tensor* tensor) {
  tensor->mutable_shape()->Assign(shape.begin(), shape.end());
}

}  // namespace

absl::StatusOr<DType> DTypeFromProto(v1::DType dtype, const std::string& field) {
  switch (dtype) {
    case v1::F32:
      return DType::kF32;
    case v1::F16:
      return DType::kF16;
    case v1::BF16:
      return DType::kBF16;
    case v1::I32:
      return DType::kI32;
    case v1::I64:
      return DType::kI64;
    case v1::DTYPE_UNSPECIFIED:
      return absl::InvalidArgumentError(
          absl::StrCat(field, " is not set (DTYPE_UNSPECIFIED); expected F32, F16, BF16, I32 or I64"));
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(field, " = ", static_cast<int>(dtype),
                                                 " is not a known DType; expected F32, F16, "
                                                 "BF16, I32 or I64"));
}

v1::DType DTypeToProto(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return v1::F32;
    case DType::kF16:
      return v1::F16;
    case DType::kBF16:
      return v1::BF16;
    case DType::kI32:
      return v1::I32;
    case DType::kI64:
      return v1::I64;
  }
  return v1::DTYPE_UNSPECIFIED;
}

absl::Status ValidateTensor(const v1::Tensor& tensor, const std::string& field) {
  ASSIGN_OR_RETURN(DType dtype, DTypeFromProto(tensor.dtype(), absl::StrCat(field, ".dtype")));
  for (int i = 0; i < tensor.shape_size(); ++i) {
    if (tensor.shape(i) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".shape[", i, "] = ", tensor.shape(i),
                                                     " is negative (shape ",
                                                     ShapeString(tensor.shape()), ")"));
    }
  }
  const int64_t count = ProductOf(tensor.shape());  // dims are >= 0 here
  int64_t bytes = 0;
  if (count < 0 || __builtin_mul_overflow(count, static_cast<int64_t>(DTypeSize(dtype)), &bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": shape ", ShapeString(tensor.shape()),
                                                   " x ", Name(dtype),
                                                   " overflows a 64-bit byte count"));
  }
  const int64_t have = static_cast<int64_t>(tensor.data().size());
  if (have != bytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": data has ", have, " bytes but shape ",
                                                   ShapeString(tensor.shape()), " x ", Name(dtype),
                                                   " needs ", bytes));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> DecodeFloatTensor(const v1::Tensor& tensor,
                                                     const std::string& field) {
  RETURN_IF_ERROR(ValidateTensor(tensor, field));
  const DType dtype = *DTypeFromProto(tensor.dtype(), field);
  if (!IsFloating(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(field, ".dtype = ", Name(dtype),
                                                   " is not a floating dtype; expected F32, F16 "
                                                   "or BF16"));
  }
  const size_t n = tensor.data().size() / DTypeSize(dtype);
  std::vector<float> out(n);
  if (n > 0) ConvertToF32(dtype, tensor.data().data(), n, out.data());
  return out;
}

absl::StatusOr<std::vector<int64_t>> DecodeIntTensor(const v1::Tensor& tensor,
                                                     const std::string& field) {
  RETURN_IF_ERROR(ValidateTensor(tensor, field));
  const DType dtype = *DTypeFromProto(tensor.dtype(), field);
  const char* src = tensor.data().data();
  if (dtype == DType::kI64) {
    std::vector<int64_t> out(tensor.data().size() / sizeof(int64_t));
    if (!out.empty()) std::memcpy(out.data(), src, tensor.data().size());
    return out;
  }
  if (dtype == DType::kI32) {
    std::vector<int64_t> out(tensor.data().size() / sizeof(int32_t));
    for (size_t i = 0; i < out.size(); ++i) {
      int32_t v;
      std::memcpy(&v, src + i * sizeof(int32_t), sizeof(int32_t));
      out[i] = v;
    }
    return out;
  }
  return absl::InvalidArgumentError(absl::StrCat(field, ".dtype = ", Name(dtype),
                                                 " is not an integer dtype; expected I32 or I64"));
}

v1::Tensor EncodeFloatTensor(const float* values, const std::vector<int64_t>& shape,
                             DType dtype) {
  v1::Tensor tensor;
  tensor.set_dtype(DTypeToProto(dtype));
  SetShape(shape, &tensor);
  const int64_t n = ProductOf(shape);
  if (n <= 0) return tensor;
  std::string* data = tensor.mutable_data();
  data->resize(static_cast<size_t>(n) * DTypeSize(dtype));
  // Integer dtypes: rounded to nearest, saturating (ConvertFromF32).
  ConvertFromF32(values, static_cast<size_t>(n), dtype, data->data());
  return tensor;
}

v1::Tensor EncodeFloatTensor(const std::vector<float>& values, const std::vector<int64_t>& shape,
                             DType dtype) {
  // Encode exactly the values given (ValidateTensor reports a mismatch
  // between values.size() and the shape on the receiving side).
  v1::Tensor tensor = EncodeFloatTensor(values.data(), {static_cast<int64_t>(values.size())}, dtype);
  SetShape(shape, &tensor);
  return tensor;
}

v1::Tensor EncodeInt64Tensor(const std::vector<int64_t>& values, const std::vector<int64_t>& shape) {
  v1::Tensor tensor;
  tensor.set_dtype(v1::I64);
  SetShape(shape, &tensor);
  tensor.mutable_data()->assign(reinterpret_cast<const char*>(values.data()),
                                values.size() * sizeof(int64_t));
  return tensor;
}

}  // namespace vocabd
