#include "server/http_json.h"

#include <vector>

#include "lib/serving/request_memory.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <limits>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/core/dtype.h"
#include "lib/core/json_limits.h"
#include "lib/core/status_macros.h"
#include "lib/tokenizer/tokenizer.h"
#include "proto/tensor_codec.h"
#include "vocabd/v1/tensor.pb.h"

namespace vocabd {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
// ordered: answers keep the field order protobuf printed.
using json = nlohmann::ordered_json;

const FieldDescriptor* FindField(const Descriptor* d, const std::string& key) {
  if (const FieldDescriptor* f = d->FindFieldByName(key)) return f;
  for (int i = 0; i < d->field_count(); ++i) {
    if (d->field(i)->json_name() == key) return d->field(i);
  }
  return nullptr;
}

// A JSON shape entry: number or (canonical int64 mapping) decimal string.
bool ShapeDim(const json& v, int64_t* out) {
  if (v.is_number_integer()) {
    *out = v.get<int64_t>();
    return true;
  }
  return v.is_string() && absl::SimpleAtoi(v.get<std::string>(), out);
}

// "values" -> "data" in one Tensor object.
absl::Status ValuesToData(json& t, const std::string& path) {
  if (!t.is_object() || !t.contains("values")) return absl::OkStatus();
  const json& values = t["values"];
  if (!values.is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".values must be an array of numbers"));
  }
  if (t.contains("data")) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": give either \"data\" (base64) or \"values\" (numbers), not both"));
  }
  v1::DType dtype = v1::F32;
  if (t.contains("dtype")) {
    const json& d = t["dtype"];
    if (d.is_string()) {
      if (!v1::DType_Parse(d.get<std::string>(), &dtype)) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ".dtype = '", d.get<std::string>(), "' is not a known DType"));
      }
    } else if (d.is_number_integer() && v1::DType_IsValid(d.get<int>())) {
      dtype = static_cast<v1::DType>(d.get<int>());
    } else {
      return absl::InvalidArgumentError(absl::StrCat(path, ".dtype = ", d.dump(),
                                                     " is not a known DType"));
    }
  }
  std::vector<int64_t> shape;
  if (t.contains("shape")) {
    if (!t["shape"].is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ".shape must be an array"));
    }
    for (size_t i = 0; i < t["shape"].size(); ++i) {
      int64_t dim = 0;
      if (!ShapeDim(t["shape"][i], &dim)) {
        return absl::InvalidArgumentError(absl::StrCat(path, ".shape[", i, "] = ",
                                                       t["shape"][i].dump(),
                                                       " is not an integer"));
      }
      shape.push_back(dim);
    }
  } else {
    shape.push_back(static_cast<int64_t>(values.size()));
  }
  v1::Tensor tensor;
  if (dtype == v1::I32 || dtype == v1::I64) {
    std::vector<int64_t> ints;
    ints.reserve(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      const json& v = values[i];
      const bool in_range =
          v.is_number_unsigned()
              ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
              : v.is_number_integer();
      if (!in_range) {
        return absl::InvalidArgumentError(absl::StrCat(path, ".values[", i, "] = ", v.dump(),
                                                       " is not an integer (dtype ",
                                                       v1::DType_Name(dtype), ")"));
      }
      const int64_t x = v.get<int64_t>();
      if (dtype == v1::I32 && (x < std::numeric_limits<int32_t>::min() ||
                               x > std::numeric_limits<int32_t>::max())) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ".values[", i, "] = ", x, " is out of range for I32"));
      }
      ints.push_back(x);
    }
    if (dtype == v1::I64) {
      tensor = EncodeInt64Tensor(ints, shape);
    } else {
      tensor.set_dtype(v1::I32);
      for (int64_t dim : shape) tensor.add_shape(dim);
      std::string* data = tensor.mutable_data();
      data->resize(ints.size() * sizeof(int32_t));
      for (size_t i = 0; i < ints.size(); ++i) {
        const int32_t x = static_cast<int32_t>(ints[i]);
        std::memcpy(data->data() + i * sizeof(int32_t), &x, sizeof(x));  // little-endian host
      }
    }
  } else {
    absl::StatusOr<DType> lib_dtype = DTypeFromProto(dtype, path + ".dtype");
    if (!lib_dtype.ok()) return lib_dtype.status();
    std::vector<float> floats;
    floats.reserve(values.size());
    // A number float32 rounds to +-inf (|x| >= FLT_MAX + half its ulp) is
    // refused, as the JSON mapping refuses it for a float field.
    constexpr double kF32Overflow = 3.4028235677973366e38;  // 2^128 - 2^103
    for (size_t i = 0; i < values.size(); ++i) {
      const json& v = values[i];
      if (v.is_number()) {
        const double x = v.get<double>();
        if (std::fabs(x) >= kF32Overflow) {
          return absl::InvalidArgumentError(absl::StrCat(path, ".values[", i, "] = ", v.dump(),
                                                         " is out of range for F32 (it rounds to ",
                                                         x > 0 ? "inf" : "-inf", ")"));
        }
        floats.push_back(static_cast<float>(x));
      } else if (v == "NaN") {
        floats.push_back(std::numeric_limits<float>::quiet_NaN());
      } else if (v == "Infinity" || v == "-Infinity") {
        const float inf = std::numeric_limits<float>::infinity();
        floats.push_back(v == "Infinity" ? inf : -inf);
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ".values[", i, "] = ", v.dump(),
            " is not a number (nor \"NaN\", \"Infinity\", \"-Infinity\")"));
      }
    }
    tensor = EncodeFloatTensor(floats, shape, *lib_dtype);
    if (*lib_dtype != DType::kF32) {
      // A finite number the tensor's dtype rounds to +-inf (F16 from 65520).
      std::vector<float> back(floats.size());
      ConvertToF32(*lib_dtype, tensor.data().data(), back.size(), back.data());
      for (size_t i = 0; i < floats.size(); ++i) {
        if (std::isfinite(floats[i]) && std::isinf(back[i])) {
          return absl::InvalidArgumentError(absl::StrCat(
              path, ".values[", i, "] = ", values[i].dump(), " is out of range for ",
              std::string(DTypeName(*lib_dtype)), " (it rounds to ", back[i] > 0 ? "inf" : "-inf", ")"));
        }
      }
    }
  }
  // The count must match the shape (ValidateTensor's message, with the path).
  int64_t needed = 1;  // -1: a negative dim, or more than int64 can count
  for (int64_t dim : shape) {
    if (needed < 0) break;
    if (dim < 0 || (dim > 0 && needed > std::numeric_limits<int64_t>::max() / dim)) {
      needed = -1;
    } else {
      needed *= dim;
    }
  }
  if (needed != static_cast<int64_t>(values.size())) {
    return absl::InvalidArgumentError(absl::StrCat(path, ".values has ", values.size(),
                                                   " numbers but shape [",
                                                   absl::StrJoin(shape, ", "), "] needs ",
                                                   needed < 0 ? std::string("?")
                                                              : absl::StrCat(needed)));
  }
  t.erase("values");
  t["dtype"] = v1::DType_Name(tensor.dtype());
  t["shape"] = json::array();
  for (int64_t dim : tensor.shape()) t["shape"].push_back(std::to_string(dim));
  t["data"] = absl::Base64Escape(tensor.data());
  return absl::OkStatus();
}

// The shortest decimal that reads back as `f`, as a JSON number; NaN and
// the infinities as the strings protobuf's JSON mapping uses for floats.
json FloatNumber(float f) {
  if (std::isnan(f)) return json("NaN");
  if (std::isinf(f)) return json(f > 0 ? "Infinity" : "-Infinity");
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), f);
  *end = '\0';
  return json(std::strtod(buf, nullptr));
}

// "data" -> "values" in one Tensor object (left as it is when too large or
// not decodable: the canonical form is always correct).
void DataToValues(json& t) {
  if (!t.is_object() || !t.contains("data") || !t["data"].is_string()) return;
  v1::Tensor tensor;
  v1::DType dtype = v1::DTYPE_UNSPECIFIED;
  if (!t.contains("dtype") || !t["dtype"].is_string() ||
      !v1::DType_Parse(t["dtype"].get<std::string>(), &dtype)) {
    return;
  }
  tensor.set_dtype(dtype);
  int64_t elements = 1;
  if (t.contains("shape") && t["shape"].is_array()) {
    for (const json& v : t["shape"]) {
      int64_t dim = 0;
      if (!ShapeDim(v, &dim) || dim < 0) return;
      tensor.add_shape(dim);
      // Stops counting above the limit (no overflow).
      elements = (elements == 0 || dim == 0) ? 0
                 : (elements > kMaxValuesElements || dim > kMaxValuesElements)
                     ? kMaxValuesElements + 1
                     : elements * dim;
    }
  }
  if (elements > kMaxValuesElements) return;
  if (!absl::Base64Unescape(t["data"].get<std::string>(), tensor.mutable_data())) return;
  json values = json::array();
  if (dtype == v1::I32 || dtype == v1::I64) {
    absl::StatusOr<std::vector<int64_t>> ints = DecodeIntTensor(tensor, "tensor");
    if (!ints.ok()) return;
    for (int64_t x : *ints) values.push_back(x);
  } else {
    absl::StatusOr<std::vector<float>> floats = DecodeFloatTensor(tensor, "tensor");
    if (!floats.ok()) return;
    for (float x : *floats) values.push_back(FloatNumber(x));
  }
  t.erase("data");
  t["values"] = std::move(values);
}

// Applies the tensor rewrite to every Tensor inside `j` (a message of type
// `d`), following the descriptor; `path` names the field for errors.
absl::Status Walk(json& j, const Descriptor* d, const std::string& path, bool to_data) {
  if (!j.is_object()) return absl::OkStatus();  // protobuf's parser reports the type
  if (d == v1::Tensor::descriptor()) {
    if (to_data) return ValuesToData(j, path);
    DataToValues(j);
    return absl::OkStatus();
  }
  for (auto it = j.begin(); it != j.end(); ++it) {
    const FieldDescriptor* f = FindField(d, it.key());
    if (f == nullptr || f->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE) continue;
    const std::string sub = path.empty() ? it.key() : absl::StrCat(path, ".", it.key());
    if (f->is_map()) {
      const FieldDescriptor* value_field = f->message_type()->map_value();
      if (value_field->cpp_type() != FieldDescriptor::CPPTYPE_MESSAGE || !it->is_object()) {
        continue;
      }
      for (auto m = it->begin(); m != it->end(); ++m) {
        absl::Status s = Walk(*m, value_field->message_type(),
                              absl::StrCat(sub, "[\"", m.key(), "\"]"), to_data);
        if (!s.ok()) return s;
      }
    } else if (f->is_repeated()) {
      if (!it->is_array()) continue;
      for (size_t i = 0; i < it->size(); ++i) {
        absl::Status s = Walk((*it)[i], f->message_type(), absl::StrCat(sub, "[", i, "]"),
                              to_data);
        if (!s.ok()) return s;
      }
    } else {
      absl::Status s = Walk(*it, f->message_type(), sub, to_data);
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckJsonText(std::string_view text) {
  const auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  if (text.size() >= 2 && ((byte(0) == 0xFF && byte(1) == 0xFE) ||
                           (byte(0) == 0xFE && byte(1) == 0xFF))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request body starts with the UTF-16 byte order mark 0x", absl::Hex(byte(0)), " 0x",
        absl::Hex(byte(1)), ": JSON bodies must be UTF-8 (RFC 8259)"));
  }
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request body byte ", nul,
        " is 0x00: JSON bodies must be UTF-8 (RFC 8259; UTF-16 and UTF-32 are not accepted)"));
  }
  RETURN_IF_ERROR(ValidateUtf8(text, "request body"));
  return CheckJsonDepth(text, kMaxJsonDepth, "request body");
}

absl::Status JsonToMessage(const std::string& text, google::protobuf::Message* message) {
  RETURN_IF_ERROR(CheckJsonText(text));
  std::string canonical = text.empty() ? std::string("{}") : text;
  // Only bodies that use the "values" convenience are rewritten.
  if (canonical.find("\"values\"") != std::string::npos) {
    json j = json::parse(canonical, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      return absl::InvalidArgumentError("request body is not valid JSON");
    }
    absl::Status s = Walk(j, message->GetDescriptor(), "", /*to_data=*/true);
    if (!s.ok()) return s;
    canonical = j.dump();
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  auto status = google::protobuf::util::JsonStringToMessage(canonical, message, options);
  if (!status.ok()) {
    // A bytes field given plain text (`"texts": ["hello"]`) is the usual
    // mistake: protobuf names only the type.
    const bool bytes_field = absl::StrContains(std::string(status.message()), "TYPE_BYTES");
    return absl::InvalidArgumentError(absl::StrCat(
        "request body is not a valid ", message->GetDescriptor()->full_name(),
        " in the protobuf JSON mapping: ", std::string(status.message()),
        bytes_field ? "; bytes fields (texts, pieces, token bytes, a tensor's data) are base64 "
                      "in JSON: the text \"hello\" is \"aGVsbG8=\""
                    : ""));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> MessageToJson(const google::protobuf::Message& message,
                                          bool tensor_values) {
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  std::string out;
  auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("response to JSON: ", std::string(status.message())));
  }
  if (!tensor_values) return out;
  json j = json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return out;
  absl::Status s = Walk(j, message.GetDescriptor(), "", /*to_data=*/false);
  if (!s.ok()) return s;
  return j.dump();
}

namespace {

// Values the JSON mapping writes for `message`: itself, each set field, each
// repeated element (messages recursively).
int64_t JsonValueCount(const google::protobuf::Message& message) {
  const google::protobuf::Reflection* reflection = message.GetReflection();
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  int64_t count = 1;
  for (const google::protobuf::FieldDescriptor* field : fields) {
    const bool is_message = field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_MESSAGE;
    if (field->is_repeated()) {
      const int n = reflection->FieldSize(message, field);
      if (!is_message) {
        count += 1 + n;
        continue;
      }
      count += 1;
      for (int i = 0; i < n; ++i) count += JsonValueCount(reflection->GetRepeatedMessage(message, field, i));
    } else if (is_message) {
      count += JsonValueCount(reflection->GetMessage(message, field));
    } else {
      count += 1;
    }
  }
  return count;
}

}  // namespace

absl::Status CheckJsonRequestCost(const std::string& body, int64_t budget) {
  if (budget <= 0) return absl::OkStatus();
  int64_t values = 0;
  for (char c : body) values += (c == '{') | (c == '[') | (c == ',');
  RequestMemory need("HTTP/JSON request");
  need.Add("body", {static_cast<int64_t>(body.size()), 6}).Add("values", {values, 512});
  return CheckRequestMemory(need, budget);
}

absl::Status CheckJsonAnswerCost(const google::protobuf::Message& message, int64_t budget) {
  if (budget <= 0) return absl::OkStatus();
  RequestMemory need("HTTP/JSON answer");
  need.Add("values", {JsonValueCount(message), 512})
      .Add("serialized", {static_cast<int64_t>(message.ByteSizeLong()), 4});
  return CheckRequestMemory(need, budget);
}

}  // namespace vocabd
