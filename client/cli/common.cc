// vocabctl input helpers: id lists, dtypes, seeded normals, files (see
// client/cli/common.h).
#include "client/cli/common.h"

#include <cmath>
#include <fstream>
#include <iterator>
#include <numbers>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace vocabd::cli {

absl::StatusOr<std::vector<int64_t>> ParseIdList(const std::string& text) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    int64_t v;
    if (!absl::SimpleAtoi(item, &v)) {
      return absl::InvalidArgumentError(absl::StrCat("'", item, "' is not an integer"));
    }
    out.push_back(v);
  }
  return out;
}

CLI::Validator IdListValidator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        auto ids = ParseIdList(text);
        if (!ids.ok()) return std::string(ids.status().message());
        if (ids->empty()) return "empty id list";
        return "";
      },
      "ID,ID,...", "IdList");
}

CLI::Validator GreaterThanZero() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        if (!absl::SimpleAtod(text, &v)) return "'" + text + "' is not a number";
        if (!(v > 0)) return "must be > 0, got " + text;
        return "";
      },
      "> 0", "GreaterThanZero");
}

absl::StatusOr<DType> ParseFloatDType(const std::string& name) {
  if (name == "f32") return DType::kF32;
  if (name == "f16") return DType::kF16;
  if (name == "bf16") return DType::kBF16;
  return absl::InvalidArgumentError(absl::StrCat("unknown dtype '", name, "'"));
}

std::vector<float> RandomNormal(size_t n, std::mt19937_64& rng) {
  auto uniform = [&rng]() {  // (0, 1]
    return (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53;
  };
  std::vector<float> out(n);
  for (size_t i = 0; i < n; i += 2) {
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double a = 2.0 * std::numbers::pi * uniform();
    out[i] = static_cast<float>(r * std::cos(a));
    if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(a));
  }
  return out;
}

std::vector<float> RandomNormal(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  return RandomNormal(n, rng);
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading '", path, "'"));
  return bytes;
}

}  // namespace vocabd::cli
