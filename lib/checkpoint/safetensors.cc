#include "lib/checkpoint/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace vocabd {
namespace {

using nlohmann::json;

// Finds the first duplicate key of any JSON object in the text (nlohmann's
// DOM parser silently keeps the last one) and the parse error, if any.
class DuplicateKeyFinder : public nlohmann::json_sax<json> {
 public:
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    scopes_.emplace_back(std::set<std::string>());
    return true;
  }
  bool key(string_t& k) override {
    auto& keys = scopes_.back();
    if (keys.has_value() && !keys->insert(k).second) {
      duplicate_ = k;
      duplicate_depth_ = scopes_.size();
      return false;  // stop: one duplicate is enough to reject
    }
    return true;
  }
  bool end_object() override {
    scopes_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    scopes_.emplace_back(std::nullopt);
    return true;
  }
  bool end_array() override {
    scopes_.pop_back();
    return true;
  }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    parse_error_ = ex.what();
    return false;
  }

  const std::optional<std::string>& duplicate() const { return duplicate_; }
  // 1 = the top-level object (tensor names), 2+ = nested.
  size_t duplicate_depth() const { return duplicate_depth_; }
  const std::optional<std::string>& parse_error_message() const { return parse_error_; }

 private:
  std::vector<std::optional<std::set<std::string>>> scopes_;
  std::optional<std::string> duplicate_;
  size_t duplicate_depth_ = 0;
  std::optional<std::string> parse_error_;
};

struct Context {
  const std::string& file;
  absl::Status Error(const std::string& rule) const {
    return absl::InvalidArgumentError(absl::StrCat(file, ": invalid safetensors file: ", rule));
  }
};

std::optional<DType> DTypeFromName(const std::string& name) {
  if (name == "F32") return DType::kF32;
  if (name == "F16") return DType::kF16;
  if (name == "BF16") return DType::kBF16;
  if (name == "I32") return DType::kI32;
  if (name == "I64") return DType::kI64;
  return std::nullopt;
}

// Reads a JSON non-negative integer that fits in int64 (nlohmann stores
// non-negative integers as number_unsigned, negatives as number_integer).
std::optional<uint64_t> NonNegativeInt(const json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return u;
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < 0) return std::nullopt;
    return static_cast<uint64_t>(i);
  }
  return std::nullopt;
}

struct Span {
  std::string name;
  uint64_t begin;  // relative to the byte buffer
  uint64_t end;
};

absl::Status ParseEntry(const Context& ctx, const std::string& name, const json& value,
                        uint64_t buffer_size, SafetensorsEntry* entry, Span* span) {
  const std::string where = absl::StrCat("tensor \"", name, "\"");
  if (!value.is_object()) {
    return ctx.Error(absl::StrCat(where, " is a JSON ", value.type_name(), ", not an object"));
  }
  // dtype
  auto it = value.find("dtype");
  if (it == value.end()) return ctx.Error(absl::StrCat(where, " has no \"dtype\""));
  if (!it->is_string()) {
    return ctx.Error(absl::StrCat(where, ".dtype is a JSON ", it->type_name(), ", not a string"));
  }
  const std::string dtype_name = it->get<std::string>();
  const std::optional<DType> dtype = DTypeFromName(dtype_name);
  if (!dtype.has_value()) {
    return ctx.Error(absl::StrCat(where, ".dtype = \"", dtype_name,
                                  "\" is not supported (supported: F32, F16, BF16, I32, I64)"));
  }
  entry->dtype = *dtype;
  // shape
  it = value.find("shape");
  if (it == value.end()) return ctx.Error(absl::StrCat(where, " has no \"shape\""));
  if (!it->is_array()) {
    return ctx.Error(absl::StrCat(where, ".shape is a JSON ", it->type_name(),
                                  ", not a list of non-negative integers"));
  }
  uint64_t num_elements = 1;
  entry->shape.clear();
  for (size_t d = 0; d < it->size(); ++d) {
    const json& dim = (*it)[d];
    const std::optional<uint64_t> n = NonNegativeInt(dim);
    if (!n.has_value()) {
      return ctx.Error(absl::StrCat(where, ".shape[", d, "] = ", dim.dump(),
                                    " is not a non-negative integer (int64)"));
    }
    if (__builtin_mul_overflow(num_elements, *n, &num_elements) ||
        num_elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return ctx.Error(absl::StrCat(where, ".shape = ", it->dump(),
                                    ": the element count overflows int64"));
    }
    entry->shape.push_back(static_cast<int64_t>(*n));
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(num_elements, static_cast<uint64_t>(DTypeSize(*dtype)), &nbytes)) {
    return ctx.Error(absl::StrCat(where, ".shape = ", it->dump(), " x ", dtype_name,
                                  ": the byte size overflows uint64"));
  }
  // data_offsets
  it = value.find("data_offsets");
  if (it == value.end()) return ctx.Error(absl::StrCat(where, " has no \"data_offsets\""));
  if (!it->is_array() || it->size() != 2) {
    return ctx.Error(absl::StrCat(where, ".data_offsets = ", it->dump(),
                                  " is not a list [begin, end] of two integers"));
  }
  const std::optional<uint64_t> begin = NonNegativeInt((*it)[0]);
  const std::optional<uint64_t> end = NonNegativeInt((*it)[1]);
  if (!begin.has_value() || !end.has_value()) {
    return ctx.Error(absl::StrCat(where, ".data_offsets = ", it->dump(),
                                  " must hold two non-negative integers"));
  }
  if (*begin > *end) {
    return ctx.Error(absl::StrCat(where, ".data_offsets = ", it->dump(), " has begin > end"));
  }
  if (*end > buffer_size) {
    return ctx.Error(absl::StrCat(where, ".data_offsets = ", it->dump(),
                                  " is out of bounds: the byte buffer after the header holds ",
                                  buffer_size, " bytes"));
  }
  if (*end - *begin != nbytes) {
    return ctx.Error(absl::StrCat(where, ".data_offsets = ", it->dump(), " span ", *end - *begin,
                                  " bytes but shape ", value["shape"].dump(), " x ", dtype_name,
                                  " needs ", nbytes, " bytes"));
  }
  span->name = name;
  span->begin = *begin;
  span->end = *end;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(const uint8_t* data, size_t size,
                                                         const std::string& file_name) {
  const Context ctx{file_name};
  if (size < 8) {
    return ctx.Error(absl::StrCat("the file has ", size,
                                  " bytes, fewer than the 8-byte header length"));
  }
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];  // little-endian
  if (header_len > kMaxSafetensorsHeaderBytes) {
    return ctx.Error(absl::StrCat("header length ", header_len, " exceeds the limit of ",
                                  kMaxSafetensorsHeaderBytes, " bytes"));
  }
  if (header_len > size - 8) {
    return ctx.Error(absl::StrCat("header length ", header_len, " goes beyond the end of the file (",
                                  size, " bytes, ", size - 8, " after the length)"));
  }
  const char* text = reinterpret_cast<const char*>(data + 8);
  const char* text_end = text + header_len;

  SafetensorsHeader header;
  header.data_start = 8 + header_len;
  const uint64_t buffer_size = size - header.data_start;

  json root;
  try {
    DuplicateKeyFinder finder;
    json::sax_parse(text, text_end, &finder);
    if (finder.duplicate().has_value()) {
      if (finder.duplicate_depth() == 1) {
        return ctx.Error(absl::StrCat("duplicate tensor name \"", *finder.duplicate(),
                                      "\" in the header"));
      }
      return ctx.Error(
          absl::StrCat("duplicate key \"", *finder.duplicate(), "\" in a header object"));
    }
    if (finder.parse_error_message().has_value()) {
      return ctx.Error(absl::StrCat("header is not valid JSON: ", *finder.parse_error_message()));
    }
    root = json::parse(text, text_end, /*cb=*/nullptr, /*allow_exceptions=*/false);
  } catch (const json::exception& e) {
    return ctx.Error(absl::StrCat("header is not valid JSON: ", e.what()));
  }
  if (root.is_discarded()) return ctx.Error("header is not valid JSON");
  if (!root.is_object()) {
    return ctx.Error(absl::StrCat("header is a JSON ", root.type_name(), ", not an object"));
  }

  std::vector<Span> spans;
  spans.reserve(root.size());
  for (auto item = root.begin(); item != root.end(); ++item) {
    const std::string& name = item.key();
    const json& value = item.value();
    if (name == "__metadata__") {
      if (!value.is_object()) {
        return ctx.Error(absl::StrCat("__metadata__ is a JSON ", value.type_name(),
                                      ", not an object of strings"));
      }
      for (auto m = value.begin(); m != value.end(); ++m) {
        if (!m.value().is_string()) {
          return ctx.Error(absl::StrCat("__metadata__.", m.key(), " is a JSON ",
                                        m.value().type_name(), ", not a string"));
        }
        header.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    SafetensorsEntry entry;
    Span span;
    if (absl::Status s = ParseEntry(ctx, name, value, buffer_size, &entry, &span); !s.ok()) {
      return s;
    }
    entry.begin = header.data_start + span.begin;
    entry.end = header.data_start + span.end;
    header.tensors.emplace(name, std::move(entry));
    spans.push_back(std::move(span));
  }

  // The byte buffer must be tiled exactly: sorted by offset, each tensor
  // starts where the previous one ended, the first at 0, the last at the end
  // of the file.
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t cursor = 0;
  const Span* previous = nullptr;
  for (const Span& span : spans) {
    if (span.begin < cursor) {
      return ctx.Error(absl::StrCat("tensor \"", span.name, "\" data_offsets [", span.begin, ", ",
                                    span.end, "] overlap tensor \"", previous->name,
                                    "\" which ends at ", cursor));
    }
    if (span.begin > cursor) {
      return ctx.Error(absl::StrCat(
          "gap of ", span.begin - cursor, " bytes in the byte buffer before tensor \"", span.name,
          "\" (data_offsets [", span.begin, ", ", span.end, "], expected begin ", cursor, ")"));
    }
    cursor = span.end;
    previous = &span;
  }
  if (cursor != buffer_size) {
    return ctx.Error(absl::StrCat("the byte buffer holds ", buffer_size,
                                  " bytes but the tensors end at ", cursor, " (",
                                  buffer_size - cursor, " trailing bytes)"));
  }
  return header;
}

}  // namespace vocabd
