#include "server/metrics.h"

#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "grpc/health/v1/health.pb.h"
#include "tests/server/prometheus_text.h"
#include "vocabd/v1/embedding.pb.h"
#include "vocabd/v1/scoring.pb.h"

namespace vocabd {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::Optional;
using testing::PrometheusText;

constexpr char kEmbed[] = "/vocabd.v1.EmbeddingService/Embed";

std::unique_ptr<Metrics> Make(Metrics::Options options = {}) {
  auto m = Metrics::Create(options);
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(*m);
}

TEST(MetricsTest, HistogramsHaveCumulativeBucketsSumAndCount) {
  Metrics::Options options;
  options.batch_size_buckets = {1, 2, 4};
  auto m = Make(options);
  for (int64_t rows : {0, 1, 3, 100}) m->ObserveBatchSize(rows);  // le is inclusive
  const std::string text = m->Render();
  EXPECT_THAT(text, HasSubstr("# TYPE vocabd_batch_size_rows histogram\n"));
  const PrometheusText p(text);
  EXPECT_THAT(p.Value("vocabd_batch_size_rows_bucket", {{"le", "1"}}), Optional(2.0));
  EXPECT_THAT(p.Value("vocabd_batch_size_rows_bucket", {{"le", "2"}}), Optional(2.0));
  EXPECT_THAT(p.Value("vocabd_batch_size_rows_bucket", {{"le", "4"}}), Optional(3.0));
  EXPECT_THAT(p.Value("vocabd_batch_size_rows_bucket", {{"le", "+Inf"}}), Optional(4.0));
  EXPECT_EQ(p.Count("vocabd_batch_size_rows_bucket"), 4u);
  EXPECT_THAT(p.Value("vocabd_batch_size_rows_sum"), Optional(104.0));
  EXPECT_THAT(p.Value("vocabd_batch_size_rows_count"), Optional(4.0));
  EXPECT_EQ(m->batch_count(), 4u);
}

TEST(MetricsTest, RequestsByMethodAndCode) {
  auto m = Make();
  m->RecordRequest(kEmbed, "OK", 0.002);
  m->RecordRequest(kEmbed, "OK", 0.003);
  m->RecordRequest(kEmbed, "INVALID_ARGUMENT", 0.0001);
  EXPECT_EQ(m->requests(kEmbed, "OK"), 2u);
  EXPECT_EQ(m->requests(kEmbed, "INVALID_ARGUMENT"), 1u);
  EXPECT_EQ(m->requests(kEmbed, "INTERNAL"), 0u);
  const std::string text = m->Render();
  EXPECT_THAT(text, Not(HasSubstr("INTERNAL")));  // reading a counter does not create it
  const PrometheusText p(text);
  EXPECT_EQ(p.Type("vocabd_requests_total"), "counter");
  EXPECT_THAT(p.Value("vocabd_requests_total", {{"method", kEmbed}, {"code", "OK"}}),
              Optional(2.0));
  EXPECT_THAT(p.Value("vocabd_requests_total", {{"method", kEmbed}, {"code", "INVALID_ARGUMENT"}}),
              Optional(1.0));
  EXPECT_EQ(p.Type("vocabd_request_duration_seconds"), "histogram");
  EXPECT_THAT(p.Value("vocabd_request_duration_seconds_bucket",
                      {{"method", kEmbed}, {"le", "0.0025"}}),
              Optional(2.0));
  EXPECT_THAT(p.Value("vocabd_request_duration_seconds_count", {{"method", kEmbed}}),
              Optional(3.0));
}

TEST(MetricsTest, GaugesCountersAndBuildInfo) {
  auto m = Make();
  m->AddInFlight(3);
  m->AddInFlight(-1);
  EXPECT_EQ(m->in_flight(), 2);
  int64_t depth = 7;
  m->SetQueueDepthSource("compute", [&depth] { return depth; });
  m->RecordSkippedWork("cancelled");
  m->RecordRejected("max_tokens_per_request");
  m->RecordRejected("max_tokens_per_request");
  m->SetBuildInfo({{"version", "0.0.1"}});
  m->SetBuildInfo({{"version", "1.2.3"}, {"git_sha", "a\"b\\c\nd"}});  // replaces the first
  PrometheusText p(m->Render());
  EXPECT_THAT(p.Value("vocabd_in_flight_requests"), Optional(2.0));
  EXPECT_THAT(p.Value("vocabd_queue_depth", {{"queue", "compute"}}), Optional(7.0));
  depth = 0;
  EXPECT_THAT(PrometheusText(m->Render()).Value("vocabd_queue_depth", {{"queue", "compute"}}),
              Optional(0.0));
  EXPECT_THAT(p.Value("vocabd_skipped_work_total", {{"reason", "cancelled"}}), Optional(1.0));
  EXPECT_EQ(m->skipped_work("cancelled"), 1u);
  EXPECT_THAT(p.Value("vocabd_rejected_requests_total", {{"limit", "max_tokens_per_request"}}),
              Optional(2.0));
  EXPECT_EQ(m->rejected("max_tokens_per_request"), 2u);
  // Label values are escaped (the parser unescapes them).
  EXPECT_THAT(p.Value("vocabd_build_info", {{"version", "1.2.3"}, {"git_sha", "a\"b\\c\nd"}}),
              Optional(1.0));
  EXPECT_EQ(p.Count("vocabd_build_info"), 1u);
  m->SetQueueDepthSource("compute", nullptr);
  EXPECT_THAT(m->Render(), Not(HasSubstr("queue=\"compute\"")));
}

TEST(MetricsTest, ModelGaugesFollowTheModelSource) {
  auto m = Make();
  std::vector<Metrics::ModelSample> models = {{"m1", 12345, std::nullopt}, {"m2", 99, 17}};
  m->SetModelSource([&models] { return models; });
  PrometheusText p(m->Render());
  EXPECT_EQ(p.Type("vocabd_model_resident_bytes"), "gauge");
  EXPECT_THAT(p.Value("vocabd_model_resident_bytes", {{"model", "m1"}}), Optional(12345.0));
  EXPECT_THAT(p.Value("vocabd_model_resident_bytes", {{"model", "m2"}}), Optional(99.0));
  // Only models with a batcher have an LM-head queue.
  EXPECT_THAT(p.Value("vocabd_queue_depth", {{"queue", "lm_head:m2"}}), Optional(17.0));
  EXPECT_EQ(p.Count("vocabd_queue_depth"), 1u);

  models.erase(models.begin());  // m1 unloaded
  p = PrometheusText(m->Render());
  EXPECT_EQ(p.Value("vocabd_model_resident_bytes", {{"model", "m1"}}), std::nullopt);
  EXPECT_THAT(p.Value("vocabd_model_resident_bytes", {{"model", "m2"}}), Optional(99.0));
  m->SetModelSource(nullptr);
  EXPECT_THAT(m->Render(), Not(HasSubstr("m2")));
}

TEST(MetricsTest, EveryFamilyHasHelpAndTypeOnceItHasASeries) {
  auto m = Make();
  m->RecordRequest(kEmbed, "OK", 0.001);
  m->SetQueueDepthSource("compute", [] { return int64_t{0}; });
  m->RecordSkippedWork("cancelled");
  m->RecordRejected("max_concurrent_requests");
  m->SetModelSource([] { return std::vector<Metrics::ModelSample>{{"m", 1, 0}}; });
  const PrometheusText p(m->Render());
  for (const auto& [family, type] : std::vector<std::pair<std::string, std::string>>{
           {"vocabd_build_info", "gauge"},
           {"vocabd_requests_total", "counter"},
           {"vocabd_request_duration_seconds", "histogram"},
           {"vocabd_in_flight_requests", "gauge"},
           {"vocabd_queue_depth", "gauge"},
           {"vocabd_batch_size_rows", "histogram"},
           {"vocabd_skipped_work_total", "counter"},
           {"vocabd_rejected_requests_total", "counter"},
           {"vocabd_model_resident_bytes", "gauge"}}) {
    EXPECT_TRUE(p.HasHelp(family)) << family;
    EXPECT_EQ(p.Type(family), type) << family;
  }
  // The unlabelled families are there from the start.
  const PrometheusText fresh(Make()->Render());
  for (const char* family :
       {"vocabd_build_info", "vocabd_in_flight_requests", "vocabd_batch_size_rows"}) {
    EXPECT_TRUE(fresh.HasHelp(family)) << family;
  }
}

// Recording from several threads while scraping (TSan checks the locking).
TEST(MetricsTest, ConcurrentRecordingAndScraping) {
  auto m = Make();
  int64_t models_scraped = 0;  // only touched by the source, under the scrape lock
  m->SetModelSource([&models_scraped] {
    ++models_scraped;
    return std::vector<Metrics::ModelSample>{{"m", 1, 0}};
  });
  constexpr int kThreads = 4;
  constexpr int kCalls = 500;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&m, t] {
      const std::string method =
          t % 2 ? "/vocabd.v1.ScoringService/Score" : "/vocabd.v1.EmbeddingService/Embed";
      for (int i = 0; i < kCalls; ++i) {
        m->AddInFlight(1);
        m->RecordRequest(method, i % 2 ? "OK" : "CANCELLED", 0.001 * i);
        m->ObserveBatchSize(i);
        m->RecordSkippedWork("cancelled");
        m->AddInFlight(-1);
      }
    });
  }
  threads.emplace_back([&m] {
    for (int i = 0; i < 50; ++i) PrometheusText p(m->Render());
  });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(m->requests(kEmbed, "OK") + m->requests("/vocabd.v1.ScoringService/Score", "CANCELLED"),
            static_cast<uint64_t>(kThreads * kCalls / 2));
  EXPECT_EQ(m->batch_count(), static_cast<uint64_t>(kThreads * kCalls));
  EXPECT_EQ(m->skipped_work("cancelled"), static_cast<uint64_t>(kThreads * kCalls));
  EXPECT_EQ(m->in_flight(), 0);
  m->Render();
  EXPECT_EQ(models_scraped, 51);
}

// Refused calls are labelled by a path the caller chose: only methods this
// binary serves keep their name, anything else is one "unknown" value.
TEST(MetricsTest, MethodLabelKeepsKnownMethodsOnly) {
  // The server links these protos; here, touching a message links them too.
  ASSERT_NE(v1::EmbedRequest::descriptor(), nullptr);
  ASSERT_NE(v1::ScoreRequest::descriptor(), nullptr);
  ASSERT_NE(grpc::health::v1::HealthCheckRequest::descriptor(), nullptr);
  EXPECT_EQ(Metrics::MethodLabel("/vocabd.v1.EmbeddingService/Embed"),
            "/vocabd.v1.EmbeddingService/Embed");
  EXPECT_EQ(Metrics::MethodLabel("/vocabd.v1.ScoringService/ScoreStream"),
            "/vocabd.v1.ScoringService/ScoreStream");
  EXPECT_EQ(Metrics::MethodLabel("/grpc.health.v1.Health/Check"), "/grpc.health.v1.Health/Check");
  for (const char* made_up :
       {"", "/", "//", "Embed", "/vocabd.v1.EmbeddingService", "/vocabd.v1.EmbeddingService/",
        "/vocabd.v1.EmbeddingService/Nope", "/vocabd.v1.Nope/Embed", "/x.y/z",
        "vocabd.v1.EmbeddingService/Embed", "/vocabd.v1.EmbeddingService/Embed/extra"}) {
    EXPECT_EQ(Metrics::MethodLabel(made_up), "unknown") << made_up;
  }
}

TEST(MetricsTest, RejectsBadBuckets) {
  Metrics::Options options;
  options.latency_buckets_seconds = {0.1, 0.1};
  auto m = Metrics::Create(options);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(m.status().message(), HasSubstr("latency_buckets_seconds[1] = 0.1"));
  options = {};
  options.batch_size_buckets = {};
  m = Metrics::Create(options);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("batch_size_buckets is empty"));
  options.batch_size_buckets = {-1};
  m = Metrics::Create(options);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("batch_size_buckets[0] = -1"));
}

}  // namespace
}  // namespace vocabd
