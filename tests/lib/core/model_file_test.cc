// lib/core/model_file.h and the SIGBUS guard of lib/core/mapped_file.h:
// regular files only (a FIFO is refused without blocking), confinement to
// the file root (links out refused, links inside followed, the thread's
// ScopedFileRoot), bounded reads, and a mapping whose file is truncated
// reads zeros instead of killing the process, with CheckIntact() reporting.
#include "lib/core/model_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/core/mapped_file.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class ModelFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = testing::MakeTempDir();
    root_ = fs::canonical(base_).string() + "/root";
    out_ = fs::canonical(base_).string() + "/out";
    fs::create_directories(root_ + "/m");
    fs::create_directories(out_);
    std::ofstream(root_ + "/m/config.json") << "{\"a\": 1}";
    std::ofstream(out_ + "/secret.json") << "{\"secret\": 1}";
  }
  std::string base_, root_, out_;
};

TEST_F(ModelFileTest, RegularFileInsideTheRootOpens) {
  auto file = OpenModelFile(root_ + "/m/config.json", root_);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_GE(file->fd.get(), 0);
  EXPECT_EQ(file->st.st_size, 8);
  EXPECT_EQ(fcntl(file->fd.get(), F_GETFL) & O_NONBLOCK, 0);
}

TEST_F(ModelFileTest, LinkOutOfTheRootIsInvalidArgument) {
  fs::create_symlink(out_ + "/secret.json", root_ + "/m/link.json");
  auto file = OpenModelFile(root_ + "/m/link.json", root_);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(file.status().message(),
              HasSubstr(root_ + "/m/link.json resolves to " + out_ +
                        "/secret.json, outside the model repository root " + root_));
  // A directory link out of the root, the file itself regular.
  fs::create_directory_symlink(out_, root_ + "/m/dir");
  file = OpenModelFile(root_ + "/m/dir/secret.json", root_);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  // Relative links climbing out are the same.
  fs::create_symlink("../../out/secret.json", root_ + "/m/rel.json");
  EXPECT_EQ(OpenModelFile(root_ + "/m/rel.json", root_).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Without a root the operator's links are followed.
  EXPECT_TRUE(OpenModelFile(root_ + "/m/link.json", "").ok());
}

TEST_F(ModelFileTest, LinkInsideTheRootIsFollowed) {
  fs::create_symlink("config.json", root_ + "/m/alias.json");
  auto text = [&] {
    ScopedFileRoot confine(root_);
    return ReadModelFile(root_ + "/m/alias.json", 1024);
  }();
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "{\"a\": 1}");
}

TEST_F(ModelFileTest, FifoIsRefusedWithoutBlocking) {
  const std::string fifo = root_ + "/m/shard.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& root : {root_, std::string()}) {
    const auto start = std::chrono::steady_clock::now();
    auto file = OpenModelFile(fifo, root);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(file.status().message(),
                HasSubstr(fifo + " is a FIFO (named pipe), not a regular file"));
  }
  auto mapped = MappedFile::Open(fifo);
  EXPECT_EQ(mapped.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ModelFileTest, OtherNonRegularFilesAndMissingOnes) {
  auto dir = OpenModelFile(root_ + "/m", "");
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dir.status().message(), HasSubstr("is a directory, not a regular file"));
  auto dev = OpenModelFile("/dev/zero", "");
  EXPECT_EQ(dev.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(dev.status().message(), HasSubstr("/dev/zero is a character device"));
  auto missing = OpenModelFile(root_ + "/m/nope.json", root_);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(root_ + "/m/nope.json"));
}

TEST_F(ModelFileTest, ScopedFileRootConfinesThisThreadOnlyAndNests) {
  fs::create_symlink(out_ + "/secret.json", root_ + "/m/link.json");
  {
    ScopedFileRoot confine(root_);
    EXPECT_EQ(CurrentFileRoot(), root_);
    EXPECT_EQ(ReadModelFile(root_ + "/m/link.json", 1024).status().code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(MappedFile::Open(root_ + "/m/link.json").status().code(),
              absl::StatusCode::kInvalidArgument);
    std::thread other([&] {
      EXPECT_EQ(CurrentFileRoot(), "");  // another thread is not confined
    });
    other.join();
    {
      ScopedFileRoot lifted("");
      EXPECT_TRUE(ReadModelFile(root_ + "/m/link.json", 1024).ok());
    }
    EXPECT_EQ(CurrentFileRoot(), root_);
  }
  EXPECT_EQ(CurrentFileRoot(), "");
  EXPECT_TRUE(MappedFile::Open(root_ + "/m/link.json").ok());
}

TEST_F(ModelFileTest, ReadModelFileRefusesFilesAboveTheLimit) {
  auto text = ReadModelFile(root_ + "/m/config.json", 4);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(text.status().message(),
              HasSubstr("has 8 bytes, more than the limit of 4 bytes"));
}

// The SIGBUS guard: reading a page past the new end of a truncated file
// would kill the process; it reads zeros and the mapping reports damage.
TEST_F(ModelFileTest, TruncatedMappingReadsZerosAndReportsDamage) {
  const std::string path = root_ + "/m/weights.bin";
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t size = 8 * page;
  {
    std::ofstream out(path, std::ios::binary);
    std::string bytes(size, '\x5a');
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->CheckIntact().ok());
  EXPECT_EQ((*file)->data()[size - 1], 0x5a);

  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(2 * page)), 0);
  // Size check before any read.
  absl::Status intact = (*file)->CheckIntact();
  EXPECT_EQ(intact.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(intact.message(), HasSubstr("changed size (" + std::to_string(size) + " -> " +
                                          std::to_string(2 * page) + " bytes)"));
  // Pages past the end: would be SIGBUS; zeros instead, every time.
  volatile const uint8_t* data = (*file)->data();
  EXPECT_EQ(data[5 * page], 0);
  EXPECT_EQ(data[size - 1], 0);
  EXPECT_EQ(data[0], 0x5a);  // before the new end: still the file
  EXPECT_TRUE((*file)->damaged());
  EXPECT_THAT((*file)->CheckIntact().message(), HasSubstr("was truncated under its memory mapping"));
  // Hashing a damaged mapping does not crash either.
  EXPECT_EQ((*file)->Sha256Hex().size(), 64u);
}

TEST_F(ModelFileTest, FileModifiedInPlaceIsReported) {
  const std::string path = root_ + "/m/weights.bin";
  std::ofstream(path) << std::string(100, 'a');
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  struct timespec times[2] = {{0, UTIME_OMIT}, {12345, 0}};  // a new mtime
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  EXPECT_THAT((*file)->CheckIntact().message(), HasSubstr("was modified in place"));
}

TEST_F(ModelFileTest, FileReplacedByRenameLeavesTheMappingIntact) {
  const std::string path = root_ + "/m/weights.bin";
  std::ofstream(path) << std::string(100, 'a');
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  std::ofstream(path + ".new") << std::string(10, 'b');
  fs::rename(path + ".new", path);
  EXPECT_TRUE((*file)->CheckIntact().ok());
  EXPECT_EQ((*file)->data()[99], 'a');
}

}  // namespace
}  // namespace vocabd
