// vocabctl bench's engine against the real server on 127.0.0.1:0.
#include "client/load_generator.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/bench_command.h"
#include "client/bench_verify.h"
#include "client/bench_workloads.h"
#include "lib/core/dtype.h"
#include "lib/head/lm_head.h"
#include "proto/tensor_codec.h"
#include "server/server.h"
#include "tests/quant_files.h"
#include "tests/server/server_fixture.h"
#include "tests/test_util.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;
using ::testing::Key;
using ::testing::Contains;
using namespace std::chrono_literals;

TEST(LoopbackTargetTest, AcceptsLoopbackForms) {
  for (const char* t : {"127.0.0.1:50051", "localhost:1", "[::1]:50051", "127.1.2.3:9",
                        "ipv4:127.0.0.1:5,127.0.0.2:6", "ipv6:[::1]:5", "dns:///localhost:50051",
                        "dns:localhost:7", "unix:/tmp/vocabd.sock", "unix-abstract:vocabd"}) {
    EXPECT_TRUE(CheckLoopbackTarget(t).ok()) << t << ": " << CheckLoopbackTarget(t);
  }
}

TEST(LoopbackTargetTest, RefusesOtherHostsNamingTheTarget) {
  for (const char* t : {"10.0.0.1:50051", "8.8.8.8:53", "ipv4:127.0.0.1:5,10.1.1.1:6",
                        "dns://8.8.8.8/localhost:5", "[2001:db8::1]:5", "no-such-host.invalid:1",
                        "xds:///vocabd", ""}) {
    absl::Status s = CheckLoopbackTarget(t);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << t;
    EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat("--target '", t, "'")));
  }
}

TEST(ParseTest, DurationsAndConcurrencyLists) {
  EXPECT_EQ(*ParseDuration("10s", "--duration"), 10s);
  EXPECT_EQ(*ParseDuration("500ms", "--duration"), 500ms);
  EXPECT_EQ(*ParseDuration("10m", "--duration"), 600s);
  EXPECT_EQ(*ParseDuration("1.5", "--duration"), 1500ms);
  auto bad = ParseDuration("soon", "--warmup");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--warmup 'soon'"));
  EXPECT_EQ(ParseDuration("-1s", "--duration").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseConcurrencyList("1,4,16,64"), (std::vector<int>{1, 4, 16, 64}));
  auto bad_list = ParseConcurrencyList("1,x");
  EXPECT_THAT(std::string(bad_list.status().message()), HasSubstr("'x'"));
  EXPECT_FALSE(ParseConcurrencyList("0").ok());
}

TEST(OptionsTest, ValidateNamesTheOption) {
  LoadGenerator::Options o;
  o.connections = 0;
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("--connections = 0"));
  o = {};
  o.rate = -1;
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("--rate = -1"));
  o = {};
  o.requests = 0;
  o.duration = 0s;
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("--duration"));
  o = {};
  o.target = "192.0.2.1:50051";
  EXPECT_THAT(std::string(o.Validate().message()), HasSubstr("loopback"));
}

TEST(RssTest, ReadsOwnVmRss) {
  auto rss = ReadProcessRssBytes(getpid());
  ASSERT_TRUE(rss.ok()) << rss.status();
  EXPECT_GT(*rss, 1 << 20);
  EXPECT_EQ(ReadProcessRssBytes(999999999).status().code(), absl::StatusCode::kNotFound);
}

class LoadGeneratorTest : public testing::ServerTest {
 protected:
  static v1::ModelInfo Model(const std::string& name = testing::kBinModel) {
    auto info = client().GetModel(name);
    EXPECT_TRUE(info.ok()) << info.status();
    return *info;
  }
  static std::unique_ptr<LoadGenerator> Make(const LoadGenerator::Options& o, const BenchPayloadOptions& p,
                                             std::shared_ptr<const BenchReference> ref = nullptr) {
    auto w = MakeBenchWorkload(p, Model(p.model.empty() ? testing::kBinModel : p.model), ref);
    EXPECT_TRUE(w.ok()) << w.status();
    auto g = LoadGenerator::Create(o, std::move(*w));
    EXPECT_TRUE(g.ok()) << g.status();
    return std::move(*g);
  }
  static LoadGenerator::Options Opts() {
    LoadGenerator::Options o;
    o.target = server().target();
    return o;
  }
};

TEST_F(LoadGeneratorTest, ClosedLoopCountsEveryRequestAndByte) {
  auto o = Opts();
  o.requests = 60;
  o.concurrency = 4;
  o.connections = 3;
  BenchPayloadOptions p;
  p.rpc = "embed";
  p.tokens = 16;
  p.rows = 2;
  auto gen = Make(o, p);
  auto r = gen->Run();
  EXPECT_EQ(r.ok, 60);
  EXPECT_EQ(r.errors, 0);
  EXPECT_EQ(r.latency.count(), 60);
  EXPECT_EQ(r.concurrency, 4);
  EXPECT_EQ(r.connections, 3);
  // 32 rows x 64 floats each response, plus framing.
  EXPECT_GE(r.bytes_received, 60 * 32 * 64 * 4);
  EXPECT_LE(r.bytes_received, 60 * (32 * 64 * 4 + 200));
  // Payloads are sent round-robin; their sizes differ by varint lengths.
  int64_t smallest = INT64_MAX, largest = 0;
  for (size_t i = 0; i < gen->workload().num_payloads(); ++i) {
    smallest = std::min(smallest, gen->workload().request_bytes(i));
    largest = std::max(largest, gen->workload().request_bytes(i));
  }
  EXPECT_GE(r.bytes_sent, 60 * smallest);
  EXPECT_LE(r.bytes_sent, 60 * largest);
  EXPECT_GT(smallest, 2 * 16 * 1);
  EXPECT_GT(r.requests_per_s(), 0);
  EXPECT_GT(r.latency.min(), 0);
  EXPECT_LE(r.latency.ValueAtPercentile(50), r.latency.ValueAtPercentile(99));
  // A second level on the same generator (sweep).
  auto r2 = gen->Run(8);
  EXPECT_EQ(r2.ok, 60);
  EXPECT_EQ(r2.concurrency, 8);
}

TEST_F(LoadGeneratorTest, ErrorsAreCountedByStatusCodeAndServerKeepsServing) {
  auto o = Opts();
  o.requests = 20;
  o.concurrency = 5;
  BenchPayloadOptions p;
  p.rpc = "score";
  p.hidden = 7;  // the model's hidden_size is 64
  auto r = Make(o, p)->Run();
  EXPECT_EQ(r.ok, 0);
  EXPECT_EQ(r.errors, 20);
  ASSERT_THAT(r.errors_by_code, Contains(Key("INVALID_ARGUMENT")));
  EXPECT_EQ(r.errors_by_code.at("INVALID_ARGUMENT"), 20);
  EXPECT_THAT(r.first_error_message.at("INVALID_ARGUMENT"), HasSubstr("hidden"));
  EXPECT_EQ(*client().HealthCheck(""), "SERVING");
}

TEST_F(LoadGeneratorTest, DeadlinesApplyPerCall) {
  auto o = Opts();
  o.requests = 10;
  // 1 MiB requests and 4096 x 512 logits per call cannot finish in 100 us.
  o.timeout = std::chrono::microseconds(100);
  BenchPayloadOptions p;
  p.rpc = "score";
  p.rows = 4096;
  p.payloads = 1;
  auto r = Make(o, p)->Run();
  EXPECT_EQ(r.ok, 0);
  EXPECT_EQ(r.errors, 10);
  EXPECT_EQ(r.errors_by_code.at("DEADLINE_EXCEEDED"), 10);
  EXPECT_EQ(*client().HealthCheck(""), "SERVING");
}

TEST_F(LoadGeneratorTest, ConstantRateIssuesRateTimesDuration) {
  auto o = Opts();
  o.rate = 200;
  o.duration = 500ms;
  o.concurrency = 8;
  BenchPayloadOptions p;
  p.rpc = "rope";
  p.tokens = 4;
  auto r = Make(o, p)->Run();
  EXPECT_EQ(r.ok + r.errors, 100);  // arrivals at 0, 5, ..., 495 ms
  EXPECT_EQ(r.errors, 0);
  // The last arrival is at 495 ms: the run cannot end before it (how much
  // later depends on the machine, so no upper bound).
  EXPECT_GE(r.elapsed_s, 0.49);
}

TEST_F(LoadGeneratorTest, PoissonArrivalsAverageTheRate) {
  auto o = Opts();
  o.rate = 1000;
  o.arrival = LoadGenerator::Arrival::kPoisson;
  o.requests = 300;
  o.concurrency = 16;
  o.seed = 5;
  BenchPayloadOptions p;
  p.rpc = "embed";
  p.tokens = 4;
  auto r = Make(o, p)->Run();
  EXPECT_EQ(r.ok, 300);
  EXPECT_EQ(r.errors, 0);
  // The schedule is the generator's: 299 exponential gaps of mean 1 ms drawn
  // from std::mt19937_64(seed + 1) (the measured phase's stream). The run
  // cannot end before its last arrival; how much later depends on the
  // machine, so there is no upper bound.
  std::mt19937_64 rng(o.seed + 1);
  std::exponential_distribution<double> gap_s(o.rate);
  double last_arrival_s = 0;
  for (int i = 1; i < 300; ++i) last_arrival_s += gap_s(rng);
  EXPECT_NEAR(last_arrival_s, 0.3, 3 * 0.0173);  // the rate: mean 1 ms, sd sqrt(299) ms
  EXPECT_GE(r.elapsed_s, last_arrival_s - 1e-3);
}

TEST_F(LoadGeneratorTest, DurationModeWithWarmupAndWindows) {
  auto o = Opts();
  o.duration = 400ms;
  o.warmup = 100ms;
  o.window = 100ms;
  o.concurrency = 2;
  BenchPayloadOptions p;
  p.rpc = "embed";
  p.tokens = 8;
  auto r = Make(o, p)->Run();
  EXPECT_GT(r.ok, 10);
  EXPECT_GE(r.elapsed_s, 0.4);
  EXPECT_LT(r.elapsed_s, 0.6 * testing::kSanitizerSlowdown);
  ASSERT_GE(r.windows.size(), 4u);
  int64_t total = 0;
  for (const auto& w : r.windows) total += w.count;
  EXPECT_EQ(total, r.ok);
  EXPECT_GT(r.windows[0].p99_ns, 0);
}

// vocabctl bench --phases-from-stdin: MarkPhase splits the measurement's
// calls by completion time; Stop ends a run long before its --duration.
// The marks are placed from the progress callback (the Run thread), so the
// order of calls and marks is fixed without sleeping.
TEST_F(LoadGeneratorTest, NamedPhasesSplitTheCallsAndStopEndsTheRun) {
  auto o = Opts();
  o.duration = 120s;  // ended by Stop()
  o.concurrency = 2;
  BenchPayloadOptions p;
  p.rpc = "embed";
  p.tokens = 4;
  auto gen = Make(o, p);
  gen->MarkPhase("before");  // no measurement yet: starts with the next one
  int64_t marked_at = -1;
  auto r = gen->Run(0, [&](const LoadGenerator::Progress& pr) {
    if (pr.warmup) return;
    if (marked_at < 0 && pr.completed >= 20) {
      gen->MarkPhase("after");
      marked_at = pr.completed;
    } else if (marked_at >= 0 && pr.completed >= marked_at + 20) {
      gen->Stop();
    }
  });
  ASSERT_EQ(r.phases.size(), 2u);
  const auto& before = r.phases[0];
  const auto& after = r.phases[1];
  EXPECT_EQ(before.name, "before");
  EXPECT_EQ(after.name, "after");
  EXPECT_EQ(before.start_s, 0.0);
  EXPECT_GT(after.start_s, 0.0);
  EXPECT_EQ(before.end_s, after.start_s);
  EXPECT_EQ(after.end_s, r.elapsed_s);
  EXPECT_GE(before.ok, 1);
  EXPECT_GE(after.ok, 1);
  EXPECT_EQ(before.ok + after.ok, r.ok);
  EXPECT_EQ(before.errors + after.errors, 0);
  EXPECT_EQ(before.latency.count(), before.ok);
  EXPECT_EQ(after.latency.count(), after.ok);
  EXPECT_LE(before.latency.ValueAtPercentile(50), before.latency.ValueAtPercentile(99));
  EXPECT_GT(after.requests_per_s(), 0);
  // The run ended at Stop() (within a second of the mark), not at its 120 s.
  EXPECT_LT(r.elapsed_s, 60.0);
}

TEST_F(LoadGeneratorTest, NamedPhasesCountErrorsByCodeInOpenLoop) {
  auto o = Opts();
  o.duration = 120s;
  o.rate = 200;
  o.concurrency = 4;
  BenchPayloadOptions p;
  p.rpc = "score";
  p.hidden = 7;  // the model's hidden_size is 64: INVALID_ARGUMENT
  auto gen = Make(o, p);
  gen->MarkPhase("bad hidden");
  auto r = gen->Run(0, [&](const LoadGenerator::Progress& pr) {
    if (pr.completed >= 10) gen->Stop();
  });
  ASSERT_EQ(r.phases.size(), 1u);
  const auto& ph = r.phases[0];
  EXPECT_EQ(ph.name, "bad hidden");
  EXPECT_EQ(ph.ok, 0);
  EXPECT_GE(ph.errors, 10);
  EXPECT_EQ(ph.errors, r.errors);
  ASSERT_THAT(ph.errors_by_code, Contains(Key("INVALID_ARGUMENT")));
  EXPECT_EQ(ph.errors_by_code.at("INVALID_ARGUMENT"), ph.errors);
  EXPECT_THAT(ph.first_error_message.at("INVALID_ARGUMENT"), HasSubstr("hidden"));
  EXPECT_LT(r.elapsed_s, 60.0);  // Stop() ended the open-loop schedule, not the 120 s
}

TEST_F(LoadGeneratorTest, VerifyAcceptsEveryRpcFromTheRealServer) {
  auto bin = BenchReference::Load(testing::Stories260KBin());
  ASSERT_TRUE(bin.ok()) << bin.status();
  std::shared_ptr<const BenchReference> ref_bin = std::move(*bin);
  auto hf = BenchReference::Load(testing::Stories260KHfDir());
  ASSERT_TRUE(hf.ok()) << hf.status();
  std::shared_ptr<const BenchReference> ref_hf = std::move(*hf);
  for (const char* model : {testing::kBinModel, testing::kHfModel}) {
    for (const char* rpc : {"embed", "logits", "score", "rope"}) {
      for (const char* dtype : {"f32", "bf16"}) {
        auto o = Opts();
        o.requests = 24;
        o.concurrency = 4;
        o.verify_every = 2;
        BenchPayloadOptions p;
        p.rpc = rpc;
        p.model = model;
        p.rows = 3;
        p.tokens = 5;
        p.top_k = 4;
        p.dtype = dtype;
        p.input_dtype = dtype;
        auto r = Make(o, p, std::string(model) == testing::kBinModel ? ref_bin : ref_hf)->Run();
        SCOPED_TRACE(absl::StrCat(model, " ", rpc, " ", dtype));
        EXPECT_EQ(r.errors, 0) << (r.first_error_message.empty() ? "" : r.first_error_message.begin()->second);
        EXPECT_EQ(r.verify.checked, 12) << r.verify.first_mismatch;
        EXPECT_EQ(r.verify.mismatches, 0) << r.verify.first_mismatch;
        EXPECT_EQ(r.verify.skipped, 0) << r.verify.first_mismatch;
      }
    }
  }
}

// The references reject responses that are off by a little.
TEST_F(LoadGeneratorTest, ReferencesCatchWrongAnswers) {
  auto loaded = BenchReference::Load(testing::Stories260KBin());
  ASSERT_TRUE(loaded.ok());
  const BenchReference& ref = **loaded;

  v1::EmbedRequest embed;
  embed.set_absolute_positions(v1::ABSOLUTE_POSITIONS_NONE);
  auto* seq = embed.add_sequences();
  for (int64_t id : {1, 403, 407}) seq->add_token_ids(id);
  auto embed_resp = client().Embed(embed);
  ASSERT_TRUE(embed_resp.ok());
  EXPECT_TRUE(ref.CheckEmbed(embed, *embed_resp).ok());
  {
    v1::EmbedResponse bad = *embed_resp;
    auto values = *DecodeFloatTensor(bad.embeddings(), "e");
    values[64 + 5] = std::nextafter(values[64 + 5], 10.0f);  // one ulp
    *bad.mutable_embeddings() = EncodeFloatTensor(values, {3, 64});
    absl::Status s = ref.CheckEmbed(embed, bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(s.message()), HasSubstr("embeddings[1, 5]"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("token id 403"));
  }
  {  // rows swapped, as a batcher mixing up requests would
    v1::EmbedRequest other = embed;
    other.mutable_sequences(0)->set_token_ids(0, 2);
    EXPECT_EQ(ref.CheckEmbed(other, *embed_resp).code(), absl::StatusCode::kDataLoss);
  }

  v1::ScoreRequest score;
  std::vector<float> hidden(2 * 64);
  for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = std::sin(0.37f * static_cast<float>(i));
  *score.mutable_hidden() = EncodeFloatTensor(hidden, {2, 64});
  score.add_target_ids(403);
  score.add_target_ids(7);
  score.set_top_k(3);
  auto score_resp = client().Score(score);
  ASSERT_TRUE(score_resp.ok());
  EXPECT_TRUE(ref.CheckScore(score, *score_resp).ok()) << ref.CheckScore(score, *score_resp);
  {
    v1::ScoreResponse bad = *score_resp;
    bad.mutable_rows(1)->set_target_logprob(bad.rows(1).target_logprob() + 0.01f);
    absl::Status s = ref.CheckScore(score, bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(s.message()), HasSubstr("rows[1].target_logprob"));
  }
  {
    v1::ScoreResponse bad = *score_resp;
    bad.mutable_rows(0)->set_target_rank(bad.rows(0).target_rank() + 1);
    EXPECT_THAT(std::string(ref.CheckScore(score, bad).message()), HasSubstr("rows[0].target_rank"));
  }
  {
    v1::ScoreResponse bad = *score_resp;
    bad.mutable_rows(0)->mutable_top_k(0)->set_token_id(bad.rows(0).top_k(2).token_id());
    EXPECT_EQ(ref.CheckScore(score, bad).code(), absl::StatusCode::kDataLoss);
  }

  v1::ComputeLogitsRequest logits;
  *logits.mutable_hidden() = score.hidden();
  auto logits_resp = client().ComputeLogits(logits);
  ASSERT_TRUE(logits_resp.ok());
  EXPECT_TRUE(ref.CheckLogits(logits, *logits_resp).ok()) << ref.CheckLogits(logits, *logits_resp);
  {
    v1::ComputeLogitsResponse bad = *logits_resp;
    auto values = *DecodeFloatTensor(bad.logits(), "l");
    values[512 + 100] += 1e-3f;
    *bad.mutable_logits() = EncodeFloatTensor(values, {2, 512});
    EXPECT_THAT(std::string(ref.CheckLogits(logits, bad).message()), HasSubstr("logits[1, 100]"));
  }

  v1::ApplyRopeRequest rope;
  rope.set_layout(v1::BHSD);
  rope.add_position_offsets(20);
  std::vector<float> q(1 * 8 * 3 * 8), k(1 * 4 * 3 * 8);
  for (size_t i = 0; i < q.size(); ++i) q[i] = std::cos(0.11f * static_cast<float>(i));
  for (size_t i = 0; i < k.size(); ++i) k[i] = std::sin(0.23f * static_cast<float>(i));
  *rope.mutable_q() = EncodeFloatTensor(q, {1, 8, 3, 8});
  *rope.mutable_k() = EncodeFloatTensor(k, {1, 4, 3, 8});
  auto rope_resp = client().ApplyRope(rope);
  ASSERT_TRUE(rope_resp.ok()) << rope_resp.status();
  EXPECT_TRUE(ref.CheckRope(rope, *rope_resp).ok()) << ref.CheckRope(rope, *rope_resp);
  {
    v1::ApplyRopeRequest shifted = rope;  // position off by one
    shifted.set_position_offsets(0, 21);
    absl::Status s = ref.CheckRope(shifted, *rope_resp);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(s.message()), HasSubstr("position 21"));
  }
  {
    v1::ApplyRopeRequest ids = rope;
    *ids.mutable_position_ids() = EncodeInt64Tensor({1, 2, 3}, {3});
    EXPECT_EQ(ref.CheckRope(ids, *rope_resp).code(), absl::StatusCode::kUnimplemented);
  }
}

// --verify on every table type the server serves: the ggml-quantized
// golden GGUFs (../shared/models/quant, SOURCES.md), an F16 GGUF, a BF16
// safetensors checkpoint, and stories260K re-encoded at load by
// --weights-dtype q8_0 / bf16 (bf16 falls back to F32 on a CPU without
// bf16 dot products; the reference follows what GetModel says is served).
class VerifyDtypeTest : public ::testing::Test {
 protected:
  // stories260K-hf with every tensor rounded to BF16 (nearest even).
  static std::string WriteBf16Stories() {
    const std::string dir = testing::MakeTempDir();
    const std::string src = testing::ReadFileBytes(testing::Stories260KHfDir() + "/model.safetensors");
    uint64_t n = 0;
    std::memcpy(&n, src.data(), 8);
    nlohmann::json header = nlohmann::json::parse(src.substr(8, n));
    const std::string data = src.substr(8 + n);
    nlohmann::json out_header = nlohmann::json::object();
    std::string out_data;
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") {
        out_header[it.key()] = it.value();
        continue;
      }
      EXPECT_EQ(it.value()["dtype"], "F32") << it.key();
      const size_t begin = it.value()["data_offsets"][0], end = it.value()["data_offsets"][1];
      std::vector<float> values((end - begin) / 4);
      std::memcpy(values.data(), data.data() + begin, end - begin);
      std::string bf16(values.size() * 2, '\0');
      ConvertFromF32(values.data(), values.size(), DType::kBF16, bf16.data());
      out_header[it.key()] = {{"dtype", "BF16"},
                              {"shape", it.value()["shape"]},
                              {"data_offsets", {out_data.size(), out_data.size() + bf16.size()}}};
      out_data += bf16;
    }
    std::string text = out_header.dump();
    while (text.size() % 8 != 0) text.push_back(' ');
    const uint64_t size = text.size();
    std::ofstream(dir + "/model.safetensors", std::ios::binary)
        << std::string(reinterpret_cast<const char*>(&size), 8) << text << out_data;
    std::ofstream(dir + "/config.json")
        << testing::ReadFileBytes(testing::Stories260KHfDir() + "/config.json");
    return dir;
  }

  static void SetUpTestSuite() {
    VocabdServer::Options options;
    options.listen_address = "127.0.0.1:0";
    options.compute_threads = 2;
    for (const std::string& stem : testing::QuantGoldenStems()) {
      options.models.push_back({stem, testing::QuantGoldenPath(stem, ".gguf")});
    }
    options.models.push_back({"q4_K-as-f32", testing::QuantGoldenPath("Q4_K", ".gguf")});
    options.serving.weights_dtype["q4_K-as-f32"] = WeightsDType::kF32;
    options.models.push_back(
        {"f16", testing::SharedModelsDir() + "/llama-2-tiny-random/llama-2-tiny-random.gguf"});
    options.models.push_back({"bf16-safetensors", WriteBf16Stories()});
    options.models.push_back({"stories-q8_0", testing::Stories260KBin()});
    options.serving.weights_dtype["stories-q8_0"] = WeightsDType::kQ8_0;
    options.models.push_back({"stories-bf16", testing::Stories260KBin()});
    options.serving.weights_dtype["stories-bf16"] = WeightsDType::kBF16;
    auto server = VocabdServer::Create(options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server).release();
    VocabdClient::Options client_options;
    client_options.target = server_->target();
    auto client = VocabdClient::Create(client_options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client).release();
  }
  static void TearDownTestSuite() {
    delete client_;
    client_ = nullptr;
    if (server_ != nullptr) server_->Shutdown();
    delete server_;
    server_ = nullptr;
  }
  // The reference for `model`, from the file the server reports, reading
  // the tables as served.
  static std::shared_ptr<const BenchReference> Reference(const v1::ModelInfo& info,
                                                         bool serve_as = true) {
    std::string path;
    for (const auto& f : info.source_files()) {
      if (f.format() != "config.json") {
        path = f.format() == "safetensors" ? f.path().substr(0, f.path().rfind('/')) : f.path();
        break;
      }
    }
    auto ref = BenchReference::Load(path);
    EXPECT_TRUE(ref.ok()) << ref.status();
    if (!ref.ok()) return nullptr;
    if (serve_as) {
      absl::Status s = (*ref)->ServeAs(info);
      EXPECT_TRUE(s.ok()) << s;
    }
    return std::shared_ptr<const BenchReference>(std::move(*ref));
  }
  static LoadGenerator::Result Run(const v1::ModelInfo& info, const std::string& rpc,
                                   std::shared_ptr<const BenchReference> ref,
                                   const std::string& dtype = "f32") {
    LoadGenerator::Options o;
    o.target = server_->target();
    o.requests = 4;
    o.concurrency = 2;
    o.verify_every = 1;
    BenchPayloadOptions p;
    p.rpc = rpc;
    p.model = info.name();
    p.rows = 3;
    p.tokens = 5;
    p.top_k = 4;
    p.payloads = 4;
    p.dtype = dtype;
    auto w = MakeBenchWorkload(p, info, ref);
    EXPECT_TRUE(w.ok()) << w.status();
    auto g = LoadGenerator::Create(o, std::move(*w));
    EXPECT_TRUE(g.ok()) << g.status();
    return (*g)->Run();
  }
  static v1::ModelInfo Info(const std::string& name) {
    auto info = client_->GetModel(name);
    EXPECT_TRUE(info.ok()) << info.status();
    return *info;
  }
  static VocabdServer* server_;
  static VocabdClient* client_;
};
VocabdServer* VerifyDtypeTest::server_ = nullptr;
VocabdClient* VerifyDtypeTest::client_ = nullptr;

TEST_F(VerifyDtypeTest, EveryServedTypeVerifiesWithoutMismatches) {
  std::vector<std::string> names = testing::QuantGoldenStems();
  for (const char* n : {"q4_K-as-f32", "f16", "bf16-safetensors", "stories-q8_0", "stories-bf16"}) {
    names.push_back(n);
  }
  for (const std::string& name : names) {
    const v1::ModelInfo info = Info(name);
    auto ref = Reference(info);
    ASSERT_NE(ref, nullptr) << name;
    // Embed rows exactly (f32), logits through the bf16 output rounding.
    for (const auto& [rpc, dtype] : std::vector<std::pair<std::string, std::string>>{
             {"embed", "f32"}, {"logits", "bf16"}, {"score", "f32"}}) {
      {
        SCOPED_TRACE(absl::StrCat(name, " (embedding ", quant::GgmlTypeName(ref->embedding_type()),
                                  ", head ", quant::GgmlTypeName(ref->head_type()), ") ", rpc,
                                  " ", dtype));
        const LoadGenerator::Result r = Run(info, rpc, ref, dtype);
        EXPECT_EQ(r.errors, 0) << (r.first_error_message.empty() ? "" : r.first_error_message.begin()->second);
        EXPECT_EQ(r.verify.checked, 4) << r.verify.first_mismatch;
        EXPECT_EQ(r.verify.mismatches, 0) << r.verify.first_mismatch;
        EXPECT_EQ(r.verify.skipped, 0) << r.verify.first_mismatch;
      }
    }
  }
}

TEST_F(VerifyDtypeTest, ServedTypesComeFromGetModel) {
  auto q8 = Reference(Info("stories-q8_0"));
  ASSERT_NE(q8, nullptr);
  EXPECT_EQ(q8->embedding_type(), quant::GgmlType::kQ8_0);
  EXPECT_EQ(q8->head_type(), quant::GgmlType::kQ8_0);
  auto km = Reference(Info("Q4_K_M"));
  ASSERT_NE(km, nullptr);
  EXPECT_EQ(km->embedding_type(), quant::GgmlType::kQ4_K);
  EXPECT_EQ(km->head_type(), quant::GgmlType::kQ6_K);
  auto as_f32 = Reference(Info("q4_K-as-f32"));
  ASSERT_NE(as_f32, nullptr);
  EXPECT_EQ(as_f32->head_type(), quant::GgmlType::kF32);
  auto bf16 = Reference(Info("stories-bf16"));
  ASSERT_NE(bf16, nullptr);
  EXPECT_EQ(bf16->head_type(),
            LmHead::Bf16Supported() ? quant::GgmlType::kBF16 : quant::GgmlType::kF32);
  // Without ServeAs the reference reads the file's F32 table: the q8_0
  // rows the server re-encoded at load are then (rightly) reported wrong.
  auto as_stored = Reference(Info("stories-q8_0"), /*serve_as=*/false);
  ASSERT_NE(as_stored, nullptr);
  const LoadGenerator::Result r = Run(Info("stories-q8_0"), "embed", as_stored);
  EXPECT_EQ(r.verify.mismatches, 4);
  // A model whose GetModel answer names a type the rows cannot hold.
  v1::ModelInfo bad = Info("Q4_K");
  for (auto& t : *bad.mutable_served_tensors()) {
    if (t.name() == kEmbedTokens) t.set_ggml_type("q9_9");
  }
  auto loaded = BenchReference::Load(testing::QuantGoldenPath("Q4_K", ".gguf"));
  ASSERT_TRUE(loaded.ok());
  absl::Status s = (*loaded)->ServeAs(bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"q9_9\""));
}

TEST_F(VerifyDtypeTest, QuantizedReferencesCatchSmallErrors) {
  const v1::ModelInfo info = Info("Q4_K_M");
  auto ref = Reference(info);
  ASSERT_NE(ref, nullptr);
  v1::EmbedRequest embed;
  embed.set_model("Q4_K_M");
  for (int64_t id : {0, 17, 1023}) embed.add_sequences()->add_token_ids(id);
  auto embed_resp = client_->Embed(embed);
  ASSERT_TRUE(embed_resp.ok()) << embed_resp.status();
  EXPECT_TRUE(ref->CheckEmbed(embed, *embed_resp).ok()) << ref->CheckEmbed(embed, *embed_resp);
  {
    v1::EmbedResponse bad = *embed_resp;
    auto values = *DecodeFloatTensor(bad.embeddings(), "e");
    values[512 + 9] = std::nextafter(values[512 + 9], 10.0f);  // one ulp
    *bad.mutable_embeddings() = EncodeFloatTensor(values, {3, 512});
    absl::Status s = ref->CheckEmbed(embed, bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(std::string(s.message()), HasSubstr("embeddings[1, 9]"));
  }
  v1::ComputeLogitsRequest logits;
  logits.set_model("Q4_K_M");
  std::vector<float> hidden(2 * 512);
  for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = std::sin(0.37f * static_cast<float>(i));
  *logits.mutable_hidden() = EncodeFloatTensor(hidden, {2, 512});
  auto logits_resp = client_->ComputeLogits(logits);
  ASSERT_TRUE(logits_resp.ok()) << logits_resp.status();
  EXPECT_TRUE(ref->CheckLogits(logits, *logits_resp).ok()) << ref->CheckLogits(logits, *logits_resp);
  {
    // 1e-3 of the row's largest |logit|: a quarter of ggml's own int8
    // error on these files (SOURCES.md), far above float rounding.
    v1::ComputeLogitsResponse bad = *logits_resp;
    auto values = *DecodeFloatTensor(bad.logits(), "l");
    float largest = 0;
    for (int j = 0; j < 1024; ++j) largest = std::max(largest, std::abs(values[1024 + j]));
    values[1024 + 100] += 1e-3f * largest;
    *bad.mutable_logits() = EncodeFloatTensor(values, {2, 1024});
    EXPECT_THAT(std::string(ref->CheckLogits(logits, bad).message()), HasSubstr("logits[1, 100]"));
  }
}

TEST_F(LoadGeneratorTest, BadPayloadOptionsNameTheFlag) {
  BenchPayloadOptions p;
  p.rpc = "embed";
  p.tokens = 0;
  auto w = MakeBenchWorkload(p, Model(), nullptr);
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("--tokens = 0"));
  p = {};
  p.rpc = "score";
  p.top_k = 2000;
  EXPECT_THAT(std::string(MakeBenchWorkload(p, Model(), nullptr).status().message()), HasSubstr("--top-k = 2000"));
  p = {};
  p.rpc = "embed";
  p.payload_files = {"/nonexistent/payload.json"};
  EXPECT_EQ(MakeBenchWorkload(p, Model(), nullptr).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(LoadGeneratorTest, PayloadFilesRoundTripInEveryFormat) {
  const std::string dir = testing::MakeTempDir();
  for (const char* ext : {".json", ".txtpb", ".pb"}) {
    BenchPayloadOptions p;
    p.rpc = "score";
    p.rows = 2;
    p.top_k = 2;
    const std::string path = dir + "/payload" + ext;
    ASSERT_TRUE(SaveBenchPayload(p, Model(), path).ok());
    BenchPayloadOptions from_file;
    from_file.rpc = "score";
    from_file.payload_files = {path};
    auto w = MakeBenchWorkload(from_file, Model(), nullptr);
    ASSERT_TRUE(w.ok()) << ext << ": " << w.status();
    auto generated = MakeBenchWorkload(p, Model(), nullptr);
    EXPECT_EQ((*w)->num_payloads(), 1u);
    EXPECT_EQ((*w)->request_bytes(0), (*generated)->request_bytes(0)) << ext;
    auto o = Opts();
    o.requests = 5;
    auto g = LoadGenerator::Create(o, std::move(*w));
    ASSERT_TRUE(g.ok());
    EXPECT_EQ((*g)->Run().ok, 5) << ext;
  }
  std::ofstream(dir + "/bad.json") << "{\"hidden\": 3}";
  BenchPayloadOptions bad;
  bad.rpc = "score";
  bad.payload_files = {dir + "/bad.json"};
  auto w = MakeBenchWorkload(bad, Model(), nullptr);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("vocabd.v1.ScoreRequest"));
}

}  // namespace
}  // namespace vocabd
