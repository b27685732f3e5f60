// Every hostile/broken file made by tests/data/make_hostile.py is refused
// by LoadCheckpoint with the expected code and a message naming the file
// and the rule (one test per case, named after it).
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "lib/checkpoint/checkpoint.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;

struct HostileCase {
  std::string name;
  std::string file;
  std::string code;
  std::vector<std::string> expect;
};

std::string HostileRoot() { return testing::SourceDir() + "/tests/data/hostile"; }

std::vector<HostileCase> LoadManifest() {
  std::ifstream in(HostileRoot() + "/manifest.json");
  std::vector<HostileCase> out;
  if (!in) return out;
  const nlohmann::json manifest = nlohmann::json::parse(in);
  for (const auto& c : manifest) {
    out.push_back({c["case"], c["file"], c["code"], c["expect"].get<std::vector<std::string>>()});
  }
  return out;
}

class HostileFileTest : public ::testing::TestWithParam<HostileCase> {};

TEST_P(HostileFileTest, RefusedNamingFileAndRule) {
  const HostileCase& c = GetParam();
  const std::string dir = HostileRoot() + "/" + c.name;
  absl::StatusOr<std::unique_ptr<Checkpoint>> ckpt = LoadCheckpoint(dir);
  ASSERT_FALSE(ckpt.ok()) << c.name << " was accepted";
  EXPECT_EQ(absl::StatusCodeToString(ckpt.status().code()), c.code) << ckpt.status();
  const std::string message(ckpt.status().message());
  EXPECT_THAT(message, HasSubstr(dir + "/" + c.file));
  for (const std::string& want : c.expect) EXPECT_THAT(message, HasSubstr(want));
}

INSTANTIATE_TEST_SUITE_P(Manifest, HostileFileTest, ::testing::ValuesIn(LoadManifest()),
                         [](const ::testing::TestParamInfo<HostileCase>& info) {
                           return info.param.name;
                         });

TEST(HostileManifestTest, CoversEveryValidationRule) {
  // One case per validation rule of the loaders: 13 safetensors + 26 GGUF
  // (4 of them RoPE keys, 5 quantized-table rules) + 12 config.json cases.
  EXPECT_EQ(LoadManifest().size(), 51u);
}

}  // namespace
}  // namespace vocabd
