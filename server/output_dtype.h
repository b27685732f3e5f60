// The `output_dtype` request field rule shared by Embed and ComputeLogits.
#ifndef VOCABD_SERVER_OUTPUT_DTYPE_H_
#define VOCABD_SERVER_OUTPUT_DTYPE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "lib/core/dtype.h"
#include "vocabd/v1/tensor.pb.h"

namespace vocabd {

// DTYPE_UNSPECIFIED -> F32; F32/F16/BF16 as given; anything else is
// INVALID_ARGUMENT naming output_dtype.
inline absl::StatusOr<DType> OutputDType(v1::DType dtype) {
  switch (dtype) {
    case v1::DTYPE_UNSPECIFIED:
    case v1::F32: return DType::kF32;
    case v1::F16: return DType::kF16;
    case v1::BF16: return DType::kBF16;
    default: {
      // DType_Name is empty for a value the enum does not define.
      const std::string& name = v1::DType_Name(dtype);
      const std::string value = name.empty() ? absl::StrCat(static_cast<int>(dtype)) : name;
      return absl::InvalidArgumentError(absl::StrCat("output_dtype = ", value,
                                                     " is not supported (use F32, F16 or BF16)"));
    }
  }
}

}  // namespace vocabd

#endif  // VOCABD_SERVER_OUTPUT_DTYPE_H_
