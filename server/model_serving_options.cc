#include "server/model_serving_options.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace vocabd {

absl::StatusOr<WeightsDType> ParseWeightsDType(const std::string& text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "auto") return WeightsDType::kAuto;
  if (lower == "f32" || lower == "float32") return WeightsDType::kF32;
  if (lower == "bf16" || lower == "bfloat16") return WeightsDType::kBF16;
  if (lower == "q8_0") return WeightsDType::kQ8_0;
  return absl::InvalidArgumentError(
      absl::StrCat("--weights-dtype: '", text, "' is not auto, f32, bf16 or q8_0"));
}

const char* WeightsDTypeName(WeightsDType dtype) {
  switch (dtype) {
    case WeightsDType::kAuto: return "auto";
    case WeightsDType::kF32: return "f32";
    case WeightsDType::kBF16: return "bf16";
    case WeightsDType::kQ8_0: return "q8_0";
  }
  return "?";
}

absl::Status ModelServingOptions::AddWeightsDTypeFlag(const std::string& flag) {
  const size_t eq = flag.find('=');
  const std::string name = eq == std::string::npos ? "" : flag.substr(0, eq);
  const std::string value = eq == std::string::npos ? flag : flag.substr(eq + 1);
  if (eq != std::string::npos && name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--weights-dtype '", flag, "': empty model name before '='"));
  }
  auto dtype = ParseWeightsDType(value);
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--weights-dtype '", flag, "': '", value, "' is not auto, f32, bf16 or q8_0"));
  }
  weights_dtype[name] = *dtype;
  return absl::OkStatus();
}

absl::Status ModelServingOptions::AddTokenizerFlag(const std::string& flag) {
  const size_t eq = flag.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == flag.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tokenizer '", flag, "': expected NAME=PATH (model name, tokenizer path)"));
  }
  const std::string name = flag.substr(0, eq);
  if (!tokenizer_paths.emplace(name, flag.substr(eq + 1)).second) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tokenizer '", flag, "': model '", name, "' already has a --tokenizer"));
  }
  return absl::OkStatus();
}

absl::Status ModelServingOptions::AddBatchingFlag(const std::string& flag) {
  const size_t colon = flag.find(':');
  const size_t eq = flag.find('=', colon == std::string::npos ? 0 : colon);
  if (colon == std::string::npos || colon == 0 || eq == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--batching '", flag, "' needs the form NAME:KEY=VALUE"));
  }
  const std::string name = flag.substr(0, colon);
  const std::string key = flag.substr(colon + 1, eq - colon - 1);
  const std::string value = flag.substr(eq + 1);
  Override& o = per_model[name];
  if (key == "enabled") {
    const std::string v = absl::AsciiStrToLower(value);
    if (v != "true" && v != "false") {
      return absl::InvalidArgumentError(
          absl::StrCat("--batching '", flag, "': enabled = '", value, "' is not true or false"));
    }
    o.enabled = v == "true";
    return absl::OkStatus();
  }
  int64_t n = 0;
  if (!absl::SimpleAtoi(value, &n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--batching '", flag, "': ", key, " = '", value, "' is not an integer"));
  }
  if (key == "max_batch_rows") {
    o.max_batch_rows = n;
  } else if (key == "max_queue_delay_us") {
    o.max_queue_delay_us = n;
  } else if (key == "max_queue_rows") {
    o.max_queue_rows = n;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--batching '", flag, "': unknown key '", key,
        "' (max_batch_rows, max_queue_delay_us, max_queue_rows, enabled)"));
  }
  return absl::OkStatus();
}

namespace {

DynamicBatcher::Options Apply(DynamicBatcher::Options b, const ModelServingOptions::Override& o) {
  if (o.max_batch_rows) b.max_batch_rows = *o.max_batch_rows;
  if (o.max_queue_delay_us) b.max_queue_delay_us = *o.max_queue_delay_us;
  if (o.max_queue_rows) b.max_queue_rows = *o.max_queue_rows;
  return b;
}

absl::Status CheckBatching(const DynamicBatcher::Options& b, const std::string& where) {
  if (b.max_batch_rows < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "max_batch_rows = ", b.max_batch_rows, " must be >= 1"));
  }
  if (b.max_queue_delay_us < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "max_queue_delay_us = ", b.max_queue_delay_us, " must be >= 0"));
  }
  if (b.max_queue_rows < b.max_batch_rows) {
    return absl::InvalidArgumentError(absl::StrCat(where, "max_queue_rows = ", b.max_queue_rows,
                                                   " must be >= max_batch_rows = ",
                                                   b.max_batch_rows));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ModelServingOptions::Validate() const {
  if (absl::Status s = CheckBatching(batching, "--"); !s.ok()) {
    // Flag spelling for the defaults: --max-batch-rows etc.
    std::string msg(s.message());
    for (auto [from, to] : {std::pair{"max_batch_rows", "max-batch-rows"},
                            std::pair{"max_queue_delay_us", "max-queue-delay-us"},
                            std::pair{"max_queue_rows", "max-queue-rows"}}) {
      for (size_t p = msg.find(from); p != std::string::npos; p = msg.find(from)) {
        msg.replace(p, std::string(from).size(), to);
      }
    }
    return absl::InvalidArgumentError(msg);
  }
  for (const auto& [name, o] : per_model) {
    absl::Status s = CheckBatching(Apply(batching, o), absl::StrCat("--batching ", name, ": "));
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

Model::Options ModelServingOptions::ForModel(const std::string& name, const std::string& path,
                                             ComputePool* pool,
                                             std::function<void(int64_t)> on_batch) const {
  Model::Options o(name, path);
  o.compute_pool = pool;
  auto dt = weights_dtype.find(name);
  if (dt == weights_dtype.end()) dt = weights_dtype.find("");
  if (dt != weights_dtype.end()) o.weights_dtype = dt->second;
  if (auto tk = tokenizer_paths.find(name); tk != tokenizer_paths.end()) {
    o.tokenizer_path = tk->second;
  }
  bool enabled = dynamic_batching;
  DynamicBatcher::Options b = batching;
  auto it = per_model.find(name);
  if (it != per_model.end()) {
    if (it->second.enabled) enabled = *it->second.enabled;
    b = Apply(b, it->second);
  }
  if (enabled) {
    b.on_batch = std::move(on_batch);
    o.batching = b;
  }
  if (tokenizer_factory) {
    o.tokenizer_factory = [factory = tokenizer_factory, name](const Checkpoint& checkpoint) {
      return factory(name, checkpoint);
    };
  }
  return o;
}

}  // namespace vocabd
