// vocabctl bench's engine against the real server on 127.0.0.1:0.
#include "client/load_generator.h"

#include <unistd.h>

#include <chrono>
#include <memory>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/bench_command.h"
#include "client/bench_verify.h"
#include "client/bench_workloads.h"
#include "proto/tensor_codec.h"
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
