// lib/model: the operations the RPCs call, on the real stories260K files.
#include "lib/serving/model.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(_OPENMP)
#include <omp.h>
#endif

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/test_util.h"
#include "lib/core/huge_pages.h"
#include "lib/head/lm_head_kernel.h"
#include "lib/tokenizer/tokenizer_loader.h"
#include "tests/tokenizer/test_tokenizer.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Model> Load(const std::string& name, const std::string& path) {
  auto model = Model::Create({name, path});
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? std::move(*model) : nullptr;
}

std::vector<float> Hidden(int rows) {
  std::vector<float> h(rows * 64);
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>(std::cos(0.7 * i));
  return h;
}

TEST(ModelTest, MissingPathIsNotFound) {
  auto model = Model::Create({"x", "/nonexistent/model.bin"});
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound) << model.status();
}

TEST(ModelTest, TiedHeadIsTheEmbeddingMemory) {
  auto model = Load("bin", testing::Stories260KBin());
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->checkpoint().lm_head().data, model->checkpoint().embedding().data);
}

// Options::head_huge_pages with VOCABD_DENSE_PACK=0 (or a CPU whose head
// kernel reads no packed copy): the head reads a 2 MiB-aligned copy of the
// file's table made in the background (lib/core/huge_pages.h), byte for
// byte; the checkpoint (and Embed) keep the mapping; off, the mapping itself.
bool HugePageAligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % HugePageBuffer::kHugePageBytes == 0;
}

TEST(ModelTest, HeadReadsAHugePageCopyOfTheFileMadeInTheBackground) {
  testing::ScopedEnv unset("VOCABD_HEAD_HUGE_PAGES", nullptr);
  testing::ScopedEnv row_major("VOCABD_DENSE_PACK", "0");  // the row-major copy
  auto file = LoadCheckpoint(testing::Stories260KHfDir());
  ASSERT_TRUE(file.ok()) << file.status();
  const WeightTensor& mapped = (*file)->embedding();
  ASSERT_NE((*file)->MappingOf(mapped.data, mapped.nbytes), nullptr);
  auto model = Load("hf", testing::Stories260KHfDir());
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->WaitForHeadCopy(), "huge pages (copied at load)");
  EXPECT_EQ(model->head_memory(), "huge pages (copied at load)");
  const void* w = model->lm_head().weights();
  EXPECT_TRUE(HugePageAligned(w));
  EXPECT_TRUE(!testing::ThpInKernel() || testing::AdvisedHugePages(w));
  EXPECT_EQ(model->checkpoint().MappingOf(w, mapped.nbytes), nullptr);
  EXPECT_EQ(std::memcmp(w, mapped.data, mapped.nbytes), 0);  // bit patterns
  // The checkpoint's table (Embed's, tied) stays the mapping; held once.
  const WeightTensor& table = model->checkpoint().lm_head();
  EXPECT_EQ(table.data, model->checkpoint().embedding().data);
  EXPECT_NE(model->checkpoint().MappingOf(table.data, table.nbytes), nullptr);
  EXPECT_EQ(model->checkpoint().resident_bytes(), (*file)->resident_bytes());

  Model::Options off("off", testing::Stories260KHfDir());
  off.head_huge_pages = false;
  auto in_place = Model::Create(off);
  ASSERT_TRUE(in_place.ok()) << in_place.status();
  EXPECT_EQ((*in_place)->WaitForHeadCopy(), "file mapping (head_huge_pages off)");
  EXPECT_EQ((*in_place)->lm_head().weights(), (*in_place)->checkpoint().lm_head().data);
  EXPECT_EQ((*in_place)->resident_bytes(), model->resident_bytes());
  const std::vector<float> h = Hidden(3);
  HeadInput input{h.data(), 3, 64};
  std::vector<float> a, b;
  ASSERT_TRUE(model->ComputeLogits(input, false, &a).ok());
  ASSERT_TRUE((*in_place)->ComputeLogits(input, false, &b).ok());
  EXPECT_EQ(a, b);
}

// By default, on a CPU with the AVX-512 head kernel, the F32 head is packed
// at load (LmHead::Options::dense_pack; this 128 KiB head before Create
// returns, Model::kInlinePackBytes) and every M reads the packed copy;
// the checkpoint (and Embed) keep the mapping, resident_bytes counts the
// table once, and the logits are the in-place row-major head's up to
// summation order.
TEST(ModelTest, HeadIsPackedAtLoadWhereTheKernelReadsPacked) {
  testing::ScopedEnv unset("VOCABD_HEAD_HUGE_PAGES", nullptr);
  testing::ScopedEnv unset_pack("VOCABD_DENSE_PACK", nullptr);
  if (DetectHeadKernelIsa() == HeadKernelIsa::kNone) GTEST_SKIP() << "no AVX-512 head kernel";
  auto model = Load("hf", testing::Stories260KHfDir());
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->WaitForHeadCopy(), "huge pages (packed at load)");
  EXPECT_EQ(model->lm_head().dense_pack_bytes(), 32 * (16 * 64 + 16) * 4);  // 512 x 64 F32
  EXPECT_EQ(model->lm_head().packed_bytes(), 0);  // the table's one copy, not an extra one
  EXPECT_THAT(model->lm_head_implementation(),
              HasSubstr("(every M; weights packed, 133120 bytes)"));
  EXPECT_EQ(model->lm_head().weights(), model->checkpoint().lm_head().data);  // Embed's
  EXPECT_EQ(model->resident_bytes(), model->checkpoint().resident_bytes());
  Model::Options off("off", testing::Stories260KHfDir());
  off.head_huge_pages = false;
  auto in_place = Model::Create(off);
  ASSERT_TRUE(in_place.ok()) << in_place.status();
  EXPECT_EQ((*in_place)->lm_head().dense_pack_bytes(), 0);
  for (int64_t rows : {1, 3, 40}) {
    const std::vector<float> h = Hidden(rows);
    HeadInput input{h.data(), rows, 64};
    std::vector<float> a, b;
    ASSERT_TRUE(model->ComputeLogits(input, false, &a).ok());
    ASSERT_TRUE((*in_place)->ComputeLogits(input, false, &b).ok());
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_NEAR(a[i], b[i], 1e-5 * std::max(1.0f, std::abs(b[i]))) << rows << " " << i;
    }
  }
}

// Destroying a model stops and joins its copy (ASan / TSan check the rest).
TEST(ModelTest, DestroyedRightAfterCreate) {
  testing::ScopedEnv unset("VOCABD_HEAD_HUGE_PAGES", nullptr);
  for (int i = 0; i < 5; ++i) {
    auto model = Load("hf", testing::Stories260KHfDir());
    ASSERT_NE(model, nullptr);
  }
}

// VOCABD_HEAD_HUGE_PAGES overrides the option; a bad value fails the load.
TEST(ModelTest, HeadHugePagesEnvironmentOverride) {
  testing::ScopedEnv unset_pack("VOCABD_DENSE_PACK", nullptr);
  {
    testing::ScopedEnv env("VOCABD_HEAD_HUGE_PAGES", "0");
    auto model = Load("hf", testing::Stories260KHfDir());
    ASSERT_NE(model, nullptr);
    EXPECT_EQ(model->WaitForHeadCopy(), "file mapping (VOCABD_HEAD_HUGE_PAGES=0)");
    EXPECT_NE(model->checkpoint().MappingOf(model->lm_head().weights(), 1), nullptr);
  }
  {
    testing::ScopedEnv env("VOCABD_HEAD_HUGE_PAGES", "1");
    Model::Options off("hf", testing::Stories260KHfDir());
    off.head_huge_pages = false;
    auto model = Model::Create(off);
    ASSERT_TRUE(model.ok()) << model.status();
    if (DetectHeadKernelIsa() != HeadKernelIsa::kNone) {
      EXPECT_EQ((*model)->WaitForHeadCopy(), "huge pages (packed at load)");
      EXPECT_GT((*model)->lm_head().dense_pack_bytes(), 0);
    } else {
      EXPECT_EQ((*model)->WaitForHeadCopy(), "huge pages (copied at load)");
      EXPECT_TRUE(HugePageAligned((*model)->lm_head().weights()));
    }
  }
  testing::ScopedEnv env("VOCABD_HEAD_HUGE_PAGES", "yes");
  auto bad = Model::Create({"hf", testing::Stories260KHfDir()});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("VOCABD_HEAD_HUGE_PAGES = 'yes' (want 0 or 1)"));
}

// Tables converted at load land in huge-page memory: BF16 from F32 (tied),
// F32 from an untied F16 GGUF (head and embedding each converted).
TEST(ModelTest, ConvertedTablesAreHugePageAligned) {
  testing::ScopedEnv unset("VOCABD_HEAD_HUGE_PAGES", nullptr);
  Model::Options bf16("bf16", testing::Stories260KHfDir());
  bf16.weights_dtype = WeightsDType::kBF16;
  auto tied = Model::Create(bf16);
  ASSERT_TRUE(tied.ok()) << tied.status();
  const WeightTensor& head = (*tied)->checkpoint().lm_head();
  if ((*tied)->fallback_reason().empty()) {
    EXPECT_EQ(head.dtype, DType::kBF16);
  }
  EXPECT_EQ(head.data, (*tied)->checkpoint().embedding().data);
  EXPECT_TRUE(HugePageAligned(head.data));
  EXPECT_TRUE(!testing::ThpInKernel() || testing::AdvisedHugePages(head.data));
  EXPECT_EQ((*tied)->WaitForHeadCopy(), "huge pages (converted at load)");
  EXPECT_EQ((*tied)->lm_head().weights(), head.data);

  auto untied = Load("gguf", testing::SharedModelsDir() +
                                 "/llama-2-tiny-random/llama-2-tiny-random.gguf");
  ASSERT_NE(untied, nullptr);
  const Checkpoint& c = untied->checkpoint();
  EXPECT_NE(c.lm_head().data, c.embedding().data);
  EXPECT_EQ(c.lm_head().dtype, DType::kF32);  // stored F16
  EXPECT_TRUE(HugePageAligned(c.lm_head().data));
  EXPECT_TRUE(HugePageAligned(c.embedding().data));
  EXPECT_EQ(c.MappingOf(c.lm_head().data, c.lm_head().nbytes), nullptr);
  EXPECT_EQ(untied->WaitForHeadCopy(), "huge pages (converted at load)");
}

TEST(ModelTest, BothFilesGiveIdenticalLogits) {
  auto bin = Load("bin", testing::Stories260KBin());
  auto hf = Load("hf", testing::Stories260KHfDir());
  ASSERT_NE(bin, nullptr);
  ASSERT_NE(hf, nullptr);
  const std::vector<float> h = Hidden(3);
  HeadInput input{h.data(), 3, 64};
  std::vector<float> a, b;
  ASSERT_TRUE(bin->ComputeLogits(input, false, &a).ok());
  ASSERT_TRUE(hf->ComputeLogits(input, false, &b).ok());
  ASSERT_EQ(a.size(), 3u * 512u);
  EXPECT_EQ(a, b);
}

TEST(ModelTest, ScoreAgreesWithLogSoftmax) {
  auto model = Load("bin", testing::Stories260KBin());
  ASSERT_NE(model, nullptr);
  const std::vector<float> h = Hidden(2);
  ScoreInput input;
  input.head = HeadInput{h.data(), 2, 64};
  input.target_ids = {10, 300};
  input.top_k = 3;
  ScoreOutput out;
  ASSERT_TRUE(model->Score(input, &out).ok());
  std::vector<float> logprobs;
  ASSERT_TRUE(model->ComputeLogits(input.head, true, &logprobs).ok());
  ASSERT_EQ(out.rows.size(), 2u);
  EXPECT_NEAR(out.rows[0].target_logprob, logprobs[10], 1e-5);
  EXPECT_NEAR(out.rows[1].target_logprob, logprobs[512 + 300], 1e-5);
  EXPECT_NEAR(out.sum_target_logprob, logprobs[10] + logprobs[512 + 300], 1e-5);
  EXPECT_EQ(out.num_targets, 2);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(out.rows[r].top_k.size(), 3u);
    const float* row = logprobs.data() + r * 512;
    const int64_t best = std::max_element(row, row + 512) - row;
    EXPECT_EQ(out.rows[r].top_k[0].first, best);
    EXPECT_NEAR(out.rows[r].top_k[0].second, row[best], 1e-5);
  }
}

// A call's rows are scored in parallel (one OpenMP region over rows; the
// LM head up to its crossover is vocabd's kernel, whose logits for a row do
// not depend on the batch): 64 rows at once give the same bits as each row
// alone, with one thread or all of them, for Score and log-softmax logits.
TEST(ModelTest, RowsScoredInParallelMatchEachRowAloneOnAnyThreadCount) {
  auto model = Load("bin", testing::Stories260KBin());
  ASSERT_NE(model, nullptr);
  // The kernel path: this CPU's crossover (LmHead::DefaultSmallRowsMax).
  const int64_t crossover = LmHead::DefaultSmallRowsMax(DType::kF32, false);
  const int rows = static_cast<int>(crossover > 0 ? crossover : LmHead::kDefaultSmallRowsMax);
  ASSERT_LE(rows, model->lm_head().small_rows_max() > 0 ? model->lm_head().small_rows_max()
                                                         : int64_t{rows});
  const std::vector<float> h = Hidden(rows);
  ScoreInput input;
  input.head = HeadInput{h.data(), rows, 64};
  input.head.temperature = 0.9f;
  input.head.vocab_limit = 500;
  for (int r = 0; r < rows; ++r) input.target_ids.push_back((37 * r) % 500);
  input.top_k = 20;
  auto run = [&](ScoreOutput* out, std::vector<float>* logprobs) {
    ASSERT_TRUE(model->Score(input, out).ok());
    ASSERT_TRUE(model->ComputeLogits(input.head, true, logprobs).ok());
  };
  ScoreOutput all;
  std::vector<float> all_lp;
  run(&all, &all_lp);
#if defined(_OPENMP)
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  ScoreOutput one;
  std::vector<float> one_lp;
  run(&one, &one_lp);
  omp_set_num_threads(threads);
  EXPECT_EQ(one_lp, all_lp);
  EXPECT_EQ(one.sum_target_logprob, all.sum_target_logprob);
  for (int r = 0; r < rows; ++r) {
    EXPECT_EQ(one.rows[r].logsumexp, all.rows[r].logsumexp) << r;
    EXPECT_EQ(one.rows[r].target_rank, all.rows[r].target_rank) << r;
    EXPECT_EQ(one.rows[r].top_k, all.rows[r].top_k) << r;
  }
#endif
  const bool kernel = model->lm_head().small_rows_max() >= rows;
  for (int r = 0; r < rows; r += 9) {
    ScoreInput single = input;
    single.head.hidden = h.data() + r * 64;
    single.head.rows = 1;
    single.target_ids = {input.target_ids[r]};
    ScoreOutput alone;
    ASSERT_TRUE(model->Score(single, &alone).ok());
    if (kernel) {
      EXPECT_EQ(alone.rows[0].logsumexp, all.rows[r].logsumexp) << r;
      EXPECT_EQ(alone.rows[0].target_logprob, all.rows[r].target_logprob) << r;
      EXPECT_EQ(alone.rows[0].top_k, all.rows[r].top_k) << r;
    } else {
      EXPECT_NEAR(alone.rows[0].logsumexp, all.rows[r].logsumexp, 1e-5) << r;
    }
    EXPECT_EQ(alone.rows[0].target_rank, all.rows[r].target_rank) << r;
  }
}

TEST(ModelTest, EmbedSinusoidalAddsTheVaswaniTable) {
  auto model = Load("bin", testing::Stories260KBin());
  ASSERT_NE(model, nullptr);
  EmbedInput input;
  input.token_ids = {{5, 6}};
  input.position_offsets = {100};
  input.position_ids = {{}};
  input.absolute_positions = AbsolutePositionsMode::kSinusoidal;
  EmbedOutput out;
  ASSERT_TRUE(model->Embed(input, &out).ok());
  const float* table = model->checkpoint().embedding().f32();
  for (int t = 0; t < 2; ++t) {
    const double pos = 100 + t;
    for (int j = 0; j < 64; ++j) {
      const int i = j / 2;
      const double angle = pos / std::pow(10000.0, 2.0 * i / 64);
      const double pe = j % 2 == 0 ? std::sin(angle) : std::cos(angle);
      EXPECT_NEAR(out.embeddings[t * 64 + j], table[(5 + t) * 64 + j] + pe, 1e-6) << t << "," << j;
    }
  }
}

TEST(ModelTest, EmbedLearnedPositionsNeedATable) {
  auto model = Load("bin", testing::Stories260KBin());
  ASSERT_NE(model, nullptr);
  EmbedInput input;
  input.token_ids = {{5}};
  input.absolute_positions = AbsolutePositionsMode::kLearned;
  EmbedOutput out;
  absl::Status status = model->Embed(input, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("no learned position table"));
}

TEST(ModelTest, EmbedRejectsNegativeOffset) {
  auto model = Load("bin", testing::Stories260KBin());
  ASSERT_NE(model, nullptr);
  EmbedInput input;
  input.token_ids = {{5}, {6}};
  input.position_offsets = {0, -4};
  EmbedOutput out;
  absl::Status status = model->Embed(input, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("sequences[1].position_offset = -4"));
}

}  // namespace
}  // namespace vocabd

namespace vocabd {
namespace {

// Model::Options::tokenizer_factory (tests and embedding programs): a
// tokenizer it returns is the model's; null keeps what the checkpoint
// carries; an error fails the load naming the model.
TEST(ModelTokenizerFactoryTest, ReplacesKeepsOrFails) {
  Model::Options options("stories", testing::Stories260KBin());
  options.tokenizer_factory = [](const Checkpoint&) -> absl::StatusOr<std::unique_ptr<Tokenizer>> {
    return LoadTokenizer(testing::Tok512Path());
  };
  auto model = Model::Create(options);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_NE((*model)->tokenizer(), nullptr);
  EXPECT_EQ((*model)->tokenizer()->vocab_size(), 512);
  EXPECT_TRUE((*model)->tokenizer_missing_reason().empty());

  Model::Options plain("plain", testing::Stories260KBin());
  plain.tokenizer_factory = [](const Checkpoint&) -> absl::StatusOr<std::unique_ptr<Tokenizer>> {
    return std::unique_ptr<Tokenizer>();
  };
  auto kept = Model::Create(plain);
  ASSERT_TRUE(kept.ok());
  auto reference = Model::Create(Model::Options("ref", testing::Stories260KBin()));
  ASSERT_TRUE(reference.ok());
  EXPECT_EQ((*kept)->tokenizer() == nullptr, (*reference)->tokenizer() == nullptr);

  plain.tokenizer_factory = [](const Checkpoint&) -> absl::StatusOr<std::unique_ptr<Tokenizer>> {
    return absl::InvalidArgumentError("bad vocabulary");
  };
  auto failed = Model::Create(plain);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(failed.status().message(), "model 'plain': tokenizer: bad vocabulary");
}

}  // namespace
}  // namespace vocabd
