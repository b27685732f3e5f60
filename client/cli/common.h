// vocabctl input helpers shared by the subcommands (and `bench` payloads):
// comma-separated id lists and their CLI11 validator, float dtype names,
// seeded standard-normal values, and reading a whole file.
#ifndef VOCABD_CLIENT_CLI_COMMON_H_
#define VOCABD_CLIENT_CLI_COMMON_H_

#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/core/dtype.h"

namespace vocabd::cli {

// "1,403,407" -> {1, 403, 407}. Spaces around items are allowed; "" -> {}.
absl::StatusOr<std::vector<int64_t>> ParseIdList(const std::string& text);

// CLI11 validator for comma-separated integer lists (non-empty).
CLI::Validator IdListValidator();

// CLI11 validator: a number > 0 (CLI::PositiveNumber's message prints the
// whole double range, 300 digits).
CLI::Validator GreaterThanZero();

// "f32", "f16", "bf16" -> DType.
absl::StatusOr<DType> ParseFloatDType(const std::string& name);

// Seeded portable standard-normal values (mt19937_64 + Box-Muller), so the
// same seed gives the same values on every platform. The first form draws
// from (and advances) `rng`; the second seeds its own.
std::vector<float> RandomNormal(size_t n, std::mt19937_64& rng);
std::vector<float> RandomNormal(size_t n, uint64_t seed);

// The whole file; NOT_FOUND when it cannot be opened.
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace vocabd::cli

#endif  // VOCABD_CLIENT_CLI_COMMON_H_
