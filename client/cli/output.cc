// vocabctl output helpers: JSON, tables, numbers, shapes, proto JSON and
// matrices (see client/cli/output.h).
#include "client/cli/output.h"

#include <google/protobuf/descriptor.h>
#include <unicode/uchar.h>
#include <unicode/utf8.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <iostream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "lib/core/shape.h"
#include "lib/core/status_macros.h"
#include "lib/tokenizer/incremental_decode.h"
#include "proto/tensor_codec.h"

namespace vocabd::cli {
namespace {

json ProtoScalarJson(const google::protobuf::Message& m, const google::protobuf::FieldDescriptor* f,
                     int index) {
  using FD = google::protobuf::FieldDescriptor;
  const auto* r = m.GetReflection();
  const bool rep = f->is_repeated();
  switch (f->cpp_type()) {
    case FD::CPPTYPE_INT32:
      return rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f);
    case FD::CPPTYPE_INT64:
      return rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f);
    case FD::CPPTYPE_UINT32:
      return rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f);
    case FD::CPPTYPE_UINT64:
      return rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f);
    case FD::CPPTYPE_DOUBLE:
      return rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f);
    case FD::CPPTYPE_FLOAT:
      return rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f);
    case FD::CPPTYPE_BOOL:
      return rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f);
    case FD::CPPTYPE_ENUM: {
      const auto* e = rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f);
      return e->name();
    }
    case FD::CPPTYPE_STRING: {
      std::string v = rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
      if (f->type() == FD::TYPE_BYTES) return absl::StrCat(v.size(), " bytes");
      return v;
    }
    case FD::CPPTYPE_MESSAGE:
      return ProtoJson(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
  }
  return nullptr;
}

}  // namespace

void PrintJson(const json& j) { std::cout << j.dump(2) << "\n"; }
void PrintJsonCompact(const json& j) { std::cout << j.dump() << "\n"; }

size_t DisplayWidth(std::string_view text) {
  size_t columns = 0;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  const int32_t length = static_cast<int32_t>(std::min<size_t>(text.size(), INT32_MAX));
  for (int32_t i = 0; i < length;) {
    UChar32 c;
    U8_NEXT(s, i, length, c);  // c < 0: an ill-formed subsequence (consumed)
    if (c < 0) {
      ++columns;
      continue;
    }
    const auto category = static_cast<UCharCategory>(u_charType(c));
    if (category == U_NON_SPACING_MARK || category == U_ENCLOSING_MARK ||
        category == U_FORMAT_CHAR) {
      continue;
    }
    const auto east_asian = u_getIntPropertyValue(c, UCHAR_EAST_ASIAN_WIDTH);
    columns += (east_asian == U_EA_WIDE || east_asian == U_EA_FULLWIDTH) ? 2 : 1;
  }
  return columns;
}

void PrintTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()));
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], DisplayWidth(r[c]));
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      line += r[c];
      if (c + 1 < r.size()) line += std::string(width[c] - DisplayWidth(r[c]) + 2, ' ');
    }
    std::cout << line << "\n";
  }
}

std::string Num(double v) { return absl::StrFormat("%.6g", v); }

std::string Cell(double v) { return absl::StrFormat("%10.5f", v); }

std::string CellRow(const float* row, int64_t show, int64_t width) {
  std::string out;
  for (int64_t c = 0; c < show; ++c) absl::StrAppend(&out, " ", Cell(row[c]));
  if (show < width) out += " ...";
  return out;
}

std::string TokenText(const std::string& bytes) {
  std::string out;
  size_t i = 0;
  while (i < bytes.size()) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x80) {
      // The character's length from its lead byte; kept only if well-formed.
      const size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      if (n > 1 && i + n <= bytes.size() &&
          !FirstInvalidUtf8(std::string_view(bytes).substr(i, n)).has_value()) {
        out.append(bytes, i, n);
        i += n;
        continue;
      }
      out += absl::StrFormat("\\x%02X", c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7F) {
      out += absl::StrFormat("\\x%02X", c);
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  return out;
}

std::string Quoted(const std::string& bytes) { return absl::StrCat("\"", TokenText(bytes), "\""); }

std::string HumanBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  return u == 0 ? absl::StrCat(bytes, " B") : absl::StrFormat("%.1f %s", v, units[u]);
}

json ShapeJson(const v1::Tensor& t) {
  return json(std::vector<int64_t>(t.shape().begin(), t.shape().end()));
}

std::string PairLayoutName(v1::RopePairLayout p) {
  switch (p) {
    case v1::INTERLEAVED:
      return "interleaved";
    case v1::HALF_SPLIT:
      return "half-split";
    default:
      return "-";
  }
}

json ProtoJson(const google::protobuf::Message& message) {
  json out = json::object();
  const auto* d = message.GetDescriptor();
  const auto* r = message.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const auto* f = d->field(i);
    if (f->is_repeated()) {
      json items = json::array();
      for (int j = 0; j < r->FieldSize(message, f); ++j)
        items.push_back(ProtoScalarJson(message, f, j));
      out[f->name()] = std::move(items);
    } else if (!f->has_presence() || r->HasField(message, f)) {
      out[f->name()] = ProtoScalarJson(message, f, 0);
    }
  }
  return out;
}

absl::StatusOr<std::vector<float>> DecodeMatrix(const v1::Tensor& t, const char* name,
                                                int64_t* rows, int64_t* cols) {
  ASSIGN_OR_RETURN(std::vector<float> values, DecodeFloatTensor(t, name));
  if (t.shape_size() != 2 || static_cast<int64_t>(values.size()) != t.shape(0) * t.shape(1)) {
    return absl::InternalError(absl::StrCat("server returned ", name, " of shape ", ShapeString(t.shape()),
                                            "; expected [positions, n]"));
  }
  *rows = t.shape(0);
  *cols = t.shape(1);
  return values;
}

void PrintMatrix(const std::string& title, const std::vector<float>& values, int64_t rows,
                 int64_t cols, int64_t first_label, int64_t show_rows, int64_t show_cols) {
  show_rows = std::min(show_rows, rows);
  show_cols = std::min(show_cols, cols);
  std::cout << title << ", first " << show_rows << " of " << rows << " rows, " << show_cols
            << " of " << cols << " values:\n";
  for (int64_t r = 0; r < show_rows; ++r) {
    std::cout << absl::StrFormat("  pos %3d:", first_label + r)
              << CellRow(values.data() + r * cols, show_cols, cols) << "\n";
  }
}

json MatrixJson(const float* values, int64_t rows, int64_t cols) {
  json out = json::array();
  for (int64_t r = 0; r < rows; ++r) {
    out.push_back(std::vector<float>(values + r * cols, values + (r + 1) * cols));
  }
  return out;
}

}  // namespace vocabd::cli
