// ResolveDataPath: relative paths tried against the search directories in
// order, absolute ones as given, NOT_FOUND naming every path tried.
#include "lib/core/data_path.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace vocabd {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

TEST(DataPathTest, FirstDirectoryHoldingThePathWins) {
  const std::string a = testing::MakeTempDir(), b = testing::MakeTempDir(),
                    c = testing::MakeTempDir();
  fs::create_directories(b + "/models/m");
  fs::create_directories(c + "/models/m");
  std::ofstream(b + "/models/m/m.bin") << "b";
  std::ofstream(c + "/models/m/m.bin") << "c";
  auto p = ResolveDataPath("models/m/m.bin", "model 'm'", {a, b, c});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, b + "/models/m/m.bin");
  // Folders resolve too, and ".." segments are normalised away.
  p = ResolveDataPath("models/./m/../m", "model 'm'", {a, c + "/x/.."});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, c + "/models/m");
}

TEST(DataPathTest, AbsolutePathsAreUsedAsGiven) {
  const std::string d = testing::MakeTempDir();
  std::ofstream(d + "/x.gguf") << "x";
  auto p = ResolveDataPath(d + "/x.gguf", "model 'x'", {"/nonexistent-dir"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(*p, d + "/x.gguf");
  p = ResolveDataPath(d + "/y.gguf", "model 'y'", {d});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(p.status().message()),
              HasSubstr("model 'y' path " + d + "/y.gguf does not exist (tried " + d + "/y.gguf)"));
}

TEST(DataPathTest, MissingPathNamesEveryDirectoryTriedOnce) {
  const std::string a = testing::MakeTempDir(), b = testing::MakeTempDir();
  auto p = ResolveDataPath("models/nope.bin", "--verify checkpoint", {a, b, a});
  ASSERT_EQ(p.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(p.status().message(), "--verify checkpoint path models/nope.bin does not exist (tried " +
                                      a + "/models/nope.bin, " + b + "/models/nope.bin)");
}

TEST(DataPathTest, EmptyPathIsInvalid) {
  auto p = ResolveDataPath("", "model 'e'", {"/"});
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(p.status().message()), HasSubstr("model 'e': empty path"));
}

TEST(DataPathTest, DefaultDirsAreCwdThenBesideTheExecutable) {
  const std::vector<std::string> dirs = DefaultDataSearchDirs();
  ASSERT_EQ(dirs.size(), 4u);
  EXPECT_EQ(dirs[0], fs::current_path().string());
  const fs::path bin = fs::read_symlink("/proc/self/exe").parent_path();
  EXPECT_EQ(dirs[1], (bin / ".." / "share" / "vocabd").lexically_normal().string());
  EXPECT_EQ(dirs[2], (bin / "..").lexically_normal().string());
  EXPECT_EQ(dirs[3], (bin / ".." / "..").lexically_normal().string());
  // This test binary is build/tests/data_path_test: ../.. is the checkout,
  // so the bundled model resolves from any working directory.
  auto p = ResolveDataPath("models/stories260K/stories260K.bin", "model 'stories260K'");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_TRUE(fs::equivalent(*p, testing::Stories260KBin()));
}

}  // namespace
}  // namespace vocabd
