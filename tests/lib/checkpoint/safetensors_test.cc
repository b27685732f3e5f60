// Tests for lib/safetensors: one test per validation rule (headers built in
// memory), plus the real stories260K-hf and fake_gpt2 files.
#include "lib/checkpoint/safetensors.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "lib/core/mapped_file.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;

constexpr char kName[] = "mem.safetensors";

// [u64 LE header_len][header][buffer_bytes zero bytes]. `header_len`
// overrides the length field when >= 0.
std::vector<uint8_t> MakeFile(const std::string& header, size_t buffer_bytes,
                              int64_t header_len = -1) {
  const uint64_t n = header_len >= 0 ? static_cast<uint64_t>(header_len) : header.size();
  std::vector<uint8_t> bytes(8 + header.size() + buffer_bytes, 0);
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(n >> (8 * i));
  std::copy(header.begin(), header.end(), bytes.begin() + 8);
  return bytes;
}

absl::StatusOr<SafetensorsHeader> Parse(const std::vector<uint8_t>& bytes) {
  return ParseSafetensorsHeader(bytes.data(), bytes.size(), kName);
}

// Expects INVALID_ARGUMENT whose message names the file and contains `rule`.
void ExpectRejected(const std::vector<uint8_t>& bytes, const std::string& rule) {
  absl::StatusOr<SafetensorsHeader> h = Parse(bytes);
  ASSERT_FALSE(h.ok()) << "accepted; expected rule: " << rule;
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << h.status();
  EXPECT_THAT(std::string(h.status().message()), HasSubstr(kName));
  EXPECT_THAT(std::string(h.status().message()), HasSubstr(rule));
}

TEST(SafetensorsTest, ValidHeaderGivesAbsoluteOffsetsAndMetadata) {
  // Entry order in JSON differs from buffer order; a zero-size tensor is OK.
  const std::string header =
      R"({"b":{"dtype":"F16","shape":[3],"data_offsets":[24,30]},)"
      R"("__metadata__":{"format":"pt","k":"v"},)"
      R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
      R"("e":{"dtype":"I64","shape":[0,5],"data_offsets":[30,30]},)"
      R"("c":{"dtype":"BF16","shape":[],"data_offsets":[30,32]}}   )";
  const auto bytes = MakeFile(header, 32);
  absl::StatusOr<SafetensorsHeader> h = Parse(bytes);
  ASSERT_TRUE(h.ok()) << h.status();
  const uint64_t start = 8 + header.size();
  EXPECT_EQ(h->data_start, start);
  EXPECT_EQ(h->metadata.size(), 2u);
  EXPECT_EQ(h->metadata.at("format"), "pt");
  EXPECT_EQ(h->metadata.at("k"), "v");
  ASSERT_EQ(h->tensors.size(), 4u);
  const SafetensorsEntry& a = h->tensors.at("a");
  EXPECT_EQ(a.dtype, DType::kF32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.begin, start);
  EXPECT_EQ(a.end, start + 24);
  const SafetensorsEntry& b = h->tensors.at("b");
  EXPECT_EQ(b.dtype, DType::kF16);
  EXPECT_EQ(b.begin, start + 24);
  EXPECT_EQ(b.end, start + 30);
  const SafetensorsEntry& c = h->tensors.at("c");
  EXPECT_EQ(c.dtype, DType::kBF16);
  EXPECT_TRUE(c.shape.empty());  // scalar: one element
  EXPECT_EQ(c.end - c.begin, 2u);
  EXPECT_EQ(h->tensors.at("e").shape, (std::vector<int64_t>{0, 5}));
  EXPECT_EQ(h->tensors.at("e").dtype, DType::kI64);
}

TEST(SafetensorsTest, EmptyHeaderObjectAndNoDataIsValid) {
  absl::StatusOr<SafetensorsHeader> h = Parse(MakeFile("{}", 0));
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(h->tensors.empty());
}

TEST(SafetensorsTest, RejectsFileShorterThanEightBytes) {
  ExpectRejected({1, 0, 0}, "fewer than the 8-byte header length");
  ExpectRejected({}, "fewer than the 8-byte header length");
}

TEST(SafetensorsTest, RejectsHeaderLengthBeyondFile) {
  ExpectRejected(MakeFile("{}", 0, /*header_len=*/3), "beyond the end of the file");
  // Length field near 2^64 must not wrap around.
  ExpectRejected(MakeFile("{}", 0, /*header_len=*/INT64_MAX), "exceeds the limit");
}

TEST(SafetensorsTest, RejectsHeaderLengthOverLimit) {
  ExpectRejected(MakeFile("{}", 0, kMaxSafetensorsHeaderBytes + 1), "exceeds the limit");
}

TEST(SafetensorsTest, RejectsInvalidJson) {
  ExpectRejected(MakeFile(R"({"a": {"dtype": "F32",)", 0), "not valid JSON");
  ExpectRejected(MakeFile(R"({} trailing)", 0), "not valid JSON");
}

TEST(SafetensorsTest, RejectsNonObjectHeader) {
  ExpectRejected(MakeFile("[1, 2]", 0), "header is a JSON array, not an object");
  ExpectRejected(MakeFile("\"x\"", 0), "header is a JSON string, not an object");
}

TEST(SafetensorsTest, RejectsDuplicateTensorNames) {
  const std::string header =
      R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})";
  ExpectRejected(MakeFile(header, 8), "duplicate tensor name \"w\"");
  // A duplicate key inside an entry is rejected too (nlohmann would keep
  // the last one silently).
  const std::string nested =
      R"({"w":{"dtype":"F16","dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  ExpectRejected(MakeFile(nested, 4), "duplicate key \"dtype\"");
}

TEST(SafetensorsTest, RejectsUnknownDtype) {
  ExpectRejected(MakeFile(R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8),
                 "tensor \"w\".dtype = \"F64\" is not supported");
  ExpectRejected(MakeFile(R"({"w":{"dtype":7,"shape":[1],"data_offsets":[0,8]}})", 8),
                 "tensor \"w\".dtype is a JSON number, not a string");
  ExpectRejected(MakeFile(R"({"w":{"shape":[1],"data_offsets":[0,8]}})", 8),
                 "tensor \"w\" has no \"dtype\"");
}

TEST(SafetensorsTest, RejectsBadShape) {
  ExpectRejected(MakeFile(R"({"w":{"dtype":"F32","shape":4,"data_offsets":[0,16]}})", 16),
                 "tensor \"w\".shape is a JSON number, not a list of non-negative integers");
  ExpectRejected(MakeFile(R"({"w":{"dtype":"F32","shape":[2,-1],"data_offsets":[0,8]}})", 8),
                 "tensor \"w\".shape[1] = -1 is not a non-negative integer");
  ExpectRejected(MakeFile(R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8),
                 "tensor \"w\".shape[0] = 2.5 is not a non-negative integer");
  ExpectRejected(MakeFile(R"({"w":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", 8),
                 "tensor \"w\".shape[0] = \"2\" is not a non-negative integer");
  ExpectRejected(MakeFile(R"({"w":{"dtype":"F32","data_offsets":[0,8]}})", 8),
                 "tensor \"w\" has no \"shape\"");
}

TEST(SafetensorsTest, RejectsShapeProductOverflow) {
  ExpectRejected(
      MakeFile(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",
               4),
      "element count overflows int64");
  // 2^62 elements fit in int64 but 2^62 * 8 bytes overflow uint64.
  ExpectRejected(
      MakeFile(R"({"w":{"dtype":"I64","shape":[4611686018427387904],"data_offsets":[0,8]}})", 8),
      "byte size overflows uint64");
}

TEST(SafetensorsTest, RejectsOverlappingOffsets) {
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  ExpectRejected(MakeFile(header, 12), "tensor \"b\" data_offsets [4, 12] overlap tensor \"a\"");
}

TEST(SafetensorsTest, RejectsGapBetweenTensors) {
  const std::string header =
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})";
  ExpectRejected(MakeFile(header, 12), "gap of 4 bytes in the byte buffer before tensor \"b\"");
  // The first tensor must start at 0.
  ExpectRejected(MakeFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
                 "gap of 4 bytes in the byte buffer before tensor \"a\"");
}

TEST(SafetensorsTest, RejectsOffsetsOutOfBounds) {
  ExpectRejected(MakeFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4),
                 "tensor \"a\".data_offsets = [0,8] is out of bounds");
  ExpectRejected(MakeFile(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 8),
                 "has begin > end");
  ExpectRejected(MakeFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4),
                 "is not a list [begin, end] of two integers");
  ExpectRejected(MakeFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", 4),
                 "must hold two non-negative integers");
}

TEST(SafetensorsTest, RejectsSizeNotShapeTimesDtype) {
  ExpectRejected(MakeFile(R"({"a":{"dtype":"F16","shape":[3],"data_offsets":[0,12]}})", 12),
                 "tensor \"a\".data_offsets = [0,12] span 12 bytes but shape [3] x F16 needs 6");
}

TEST(SafetensorsTest, RejectsBufferLongerThanLastTensor) {
  ExpectRejected(MakeFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8),
                 "the byte buffer holds 8 bytes but the tensors end at 4 (4 trailing bytes)");
  ExpectRejected(MakeFile("{}", 1), "the byte buffer holds 1 bytes but the tensors end at 0");
}

TEST(SafetensorsTest, RejectsNonStringMetadata) {
  ExpectRejected(MakeFile(R"({"__metadata__":{"n":1}})", 0),
                 "__metadata__.n is a JSON number, not a string");
  ExpectRejected(MakeFile(R"({"__metadata__":[]})", 0), "__metadata__ is a JSON array");
}

TEST(SafetensorsTest, RejectsNonObjectEntry) {
  ExpectRejected(MakeFile(R"({"a":[1,2]})", 0), "tensor \"a\" is a JSON array, not an object");
}

TEST(SafetensorsTest, ParsesStories260KHf) {
  const std::string path = testing::SharedModelsDir() + "/stories260K-hf/model.safetensors";
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->size(), 1045072u);
  absl::StatusOr<SafetensorsHeader> h =
      ParseSafetensorsHeader((*file)->data(), (*file)->size(), path);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->data_start, 8u + 4936u);
  EXPECT_EQ(h->tensors.size(), 2u + 5u * 9u);
  EXPECT_EQ(h->metadata.at("format"), "pt");
  const SafetensorsEntry& emb = h->tensors.at("model.embed_tokens.weight");
  EXPECT_EQ(emb.dtype, DType::kF32);
  EXPECT_EQ(emb.shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(emb.begin, h->data_start);
  EXPECT_EQ(emb.end, h->data_start + 131072);
  const SafetensorsEntry& down = h->tensors.at("model.layers.4.mlp.down_proj.weight");
  EXPECT_EQ(down.shape, (std::vector<int64_t>{64, 172}));
  EXPECT_EQ(down.begin, h->data_start + 996096);
  EXPECT_EQ(down.end, (*file)->size());
  const SafetensorsEntry& k = h->tensors.at("model.layers.2.self_attn.k_proj.weight");
  EXPECT_EQ(k.shape, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(h->tensors.count("lm_head.weight"), 0u);
}

TEST(SafetensorsTest, ParsesFakeGpt2) {
  const std::string path = testing::SharedModelsDir() + "/fake_gpt2/model.safetensors";
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<SafetensorsHeader> h =
      ParseSafetensorsHeader((*file)->data(), (*file)->size(), path);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->data_start, 8u + 1392u);
  EXPECT_EQ(h->tensors.size(), 16u);
  const SafetensorsEntry& wte = h->tensors.at("transformer.wte.weight");
  EXPECT_EQ(wte.shape, (std::vector<int64_t>{50257, 2}));
  EXPECT_EQ(wte.begin, h->data_start + 8504);
  EXPECT_EQ(wte.end, 411960u);
  const SafetensorsEntry& wpe = h->tensors.at("transformer.wpe.weight");
  EXPECT_EQ(wpe.shape, (std::vector<int64_t>{1024, 2}));
  EXPECT_EQ(h->tensors.at("transformer.h.0.attn.c_attn.weight").shape,
            (std::vector<int64_t>{2, 6}));
}

TEST(SafetensorsTest, TruncatedRealFileIsRejected) {
  std::string bytes = testing::ReadFileBytes(testing::SharedModelsDir() +
                                             "/stories260K-hf/model.safetensors");
  ASSERT_EQ(bytes.size(), 1045072u);
  bytes.resize(bytes.size() - 4);
  absl::StatusOr<SafetensorsHeader> h = ParseSafetensorsHeader(
      reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "cut.safetensors");
  ASSERT_FALSE(h.ok());
  EXPECT_THAT(std::string(h.status().message()), HasSubstr("cut.safetensors"));
  EXPECT_THAT(std::string(h.status().message()),
              HasSubstr("tensor \"model.layers.4.mlp.down_proj.weight\".data_offsets = "
                        "[996096,1040128] is out of bounds"));
}

TEST(MappedFileTest, OpenErrorsAndSha256) {
  EXPECT_EQ(MappedFile::Open("/nonexistent/x.bin").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(MappedFile::Open("/tmp").status().code(), absl::StatusCode::kInvalidArgument);
  const std::string dir = testing::MakeTempDir();
  {
    FILE* f = std::fopen((dir + "/empty").c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fclose(f);
    f = std::fopen((dir + "/abc").c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("abc", f);
    std::fclose(f);
  }
  auto empty = MappedFile::Open(dir + "/empty");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ((*empty)->size(), 0u);
  EXPECT_EQ((*empty)->Sha256Hex(),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  auto abc = MappedFile::Open(dir + "/abc");
  ASSERT_TRUE(abc.ok()) << abc.status();
  EXPECT_EQ((*abc)->Sha256Hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace vocabd
