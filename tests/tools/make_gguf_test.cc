// tools/vocabd_make_gguf: the files it writes load with the asked ggml
// types, and --from quantizes the checkpoint's own rows (q8_0 exactly as
// lib/quant's ggml reference rounding).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "lib/checkpoint/checkpoint.h"
#include "lib/quant/ggml_types.h"
#include "lib/quant/quantize.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

// The tool's stdout.
std::string ToolOutput(const std::string& args) {
  const std::string cmd = std::string(VOCABD_BINARY_DIR) + "/tools/vocabd_make_gguf " + args;
  std::string out;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[256];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) out += buffer;
  ::pclose(pipe);
  return out;
}

int RunTool(const std::string& args) {
  const std::string cmd = std::string(VOCABD_BINARY_DIR) + "/tools/vocabd_make_gguf " + args +
                          " > /dev/null 2>&1";
  return std::system(cmd.c_str());
}

TEST(MakeGgufToolTest, RandomHeadOfEveryServedType) {
  const std::string dir = testing::MakeTempDir();
  for (quant::GgmlType type : quant::kQuantizedServedTypes) {
    const std::string name = quant::GgmlTypeName(type);
    SCOPED_TRACE(name);
    const std::string out = dir + "/" + name + ".gguf";
    ASSERT_EQ(RunTool("--random 64x512 --embd-type " + name + " --output-type q6_K -o " + out), 0);
    auto c = LoadCheckpoint(out);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ((*c)->embedding().type_name(), name);
    EXPECT_EQ((*c)->lm_head().type_name(), "q6_K");
    EXPECT_EQ((*c)->embedding().shape, (std::vector<int64_t>{64, 512}));
    EXPECT_FALSE((*c)->config().tie_word_embeddings);
  }
}

// Each tensor's line shows its shape as written: the 1-D norm as [64]
// (issue 25: it printed [64, 1]).
TEST(MakeGgufToolTest, PrintsEachTensorsShape) {
  const std::string out = testing::MakeTempDir() + "/s.gguf";
  const std::string text = ToolOutput("--random 128x64 --embd-type q8_0 -o " + out);
  EXPECT_NE(text.find("token_embd.weight    q8_0    [128, 64] 8704 bytes\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("output_norm.weight   f32     [64] 256 bytes\n"), std::string::npos) << text;
  EXPECT_NE(text.find("output.weight        q8_0    [128, 64] 8704 bytes\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("wrote " + out + "\n"), std::string::npos) << text;
}

TEST(MakeGgufToolTest, FromCheckpointQuantizesItsRows) {
  const std::string out = testing::MakeTempDir() + "/s.gguf";
  ASSERT_EQ(RunTool("--from " + testing::Stories260KBin() + " --embd-type q8_0 --tied -o " + out), 0);
  auto q = LoadCheckpoint(out);
  auto f = LoadCheckpoint(testing::Stories260KBin());
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE((*q)->config().tie_word_embeddings);
  ASSERT_EQ((*q)->embedding().quant_type, quant::GgmlType::kQ8_0);
  std::vector<uint8_t> want(static_cast<size_t>(quant::RowBytes(quant::GgmlType::kQ8_0, 64) * 512));
  ASSERT_TRUE(quant::QuantizeRow(quant::GgmlType::kQ8_0, (*f)->embedding().f32(), 512 * 64,
                                 want.data()));
  ASSERT_EQ((*q)->embedding().nbytes, want.size());
  EXPECT_EQ(0, std::memcmp((*q)->embedding().data, want.data(), want.size()));
  // Bad shape for the type: refused with the rule.
  EXPECT_NE(RunTool("--random 8x100 --embd-type q4_K -o " + out + ".bad"), 0);
}

}  // namespace
}  // namespace vocabd
