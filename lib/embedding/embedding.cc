#include "lib/embedding/embedding.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/quant/dequantize.h"
#include "lib/quant/ggml_types.h"

namespace vocabd {

absl::Status EmbeddingLookup(const void* table, DType table_dtype, int64_t vocab_size,
                             int64_t hidden_size, const std::vector<int64_t>& ids,
                             const std::string& field_name, float* out) {
  if (vocab_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocab_size = ", vocab_size, " must be > 0"));
  }
  if (hidden_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hidden_size = ", hidden_size, " must be > 0"));
  }
  // Validate every id before writing anything.
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t id = ids[i];
    if (id < 0 || id >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(field_name, "[", i, "] = ", id,
                                                     " is outside [0, ", vocab_size, ")"));
    }
  }
  if (ids.empty()) return absl::OkStatus();
  if (table == nullptr) return absl::InvalidArgumentError("embedding table is null");
  if (out == nullptr) return absl::InvalidArgumentError("output buffer is null");
  const auto* bytes = static_cast<const uint8_t*>(table);
  const size_t row_elements = static_cast<size_t>(hidden_size);
  switch (table_dtype) {
    case DType::kF32: {
      const size_t row_bytes = row_elements * sizeof(float);
      for (size_t i = 0; i < ids.size(); ++i) {
        std::memcpy(out + i * row_elements, bytes + static_cast<size_t>(ids[i]) * row_bytes,
                    row_bytes);
      }
      return absl::OkStatus();
    }
    case DType::kF16:
    case DType::kBF16: {
      const size_t row_bytes = row_elements * DTypeSize(table_dtype);
      for (size_t i = 0; i < ids.size(); ++i) {
        ConvertToF32(table_dtype, bytes + static_cast<size_t>(ids[i]) * row_bytes, row_elements,
                     out + i * row_elements);
      }
      return absl::OkStatus();
    }
    case DType::kI32:
    case DType::kI64:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("embedding table dtype ",
                                                 std::string(DTypeName(table_dtype)),
                                                 " is not a floating dtype"));
}

absl::Status EmbeddingLookup(const void* table, quant::GgmlType table_type, int64_t vocab_size,
                             int64_t hidden_size, const std::vector<int64_t>& ids,
                             const std::string& field_name, float* out) {
  switch (table_type) {
    case quant::GgmlType::kF32:
      return EmbeddingLookup(table, DType::kF32, vocab_size, hidden_size, ids, field_name, out);
    case quant::GgmlType::kF16:
      return EmbeddingLookup(table, DType::kF16, vocab_size, hidden_size, ids, field_name, out);
    case quant::GgmlType::kBF16:
      return EmbeddingLookup(table, DType::kBF16, vocab_size, hidden_size, ids, field_name, out);
    default:
      break;
  }
  if (!quant::IsServedType(table_type)) {
    return absl::InvalidArgumentError(absl::StrCat("embedding table type ",
                                                   quant::GgmlTypeName(table_type),
                                                   " is not served"));
  }
  if (vocab_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("vocab_size = ", vocab_size, " must be > 0"));
  }
  const int64_t row_bytes = quant::RowBytes(table_type, hidden_size);
  if (hidden_size <= 0 || row_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hidden_size = ", hidden_size, " is not a positive multiple of the ",
        quant::GgmlTypeName(table_type), " block size ",
        quant::TypeInfo(table_type).block_size));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(field_name, "[", i, "] = ", ids[i],
                                                     " is outside [0, ", vocab_size, ")"));
    }
  }
  if (ids.empty()) return absl::OkStatus();
  if (table == nullptr) return absl::InvalidArgumentError("embedding table is null");
  if (out == nullptr) return absl::InvalidArgumentError("output buffer is null");
  const auto* bytes = static_cast<const uint8_t*>(table);
  for (size_t i = 0; i < ids.size(); ++i) {
    quant::DequantizeRow(table_type, bytes + ids[i] * row_bytes, hidden_size,
                         out + static_cast<int64_t>(i) * hidden_size);
  }
  return absl::OkStatus();
}

}  // namespace vocabd
