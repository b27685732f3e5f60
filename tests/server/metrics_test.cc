#include "server/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace vocabd {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::unique_ptr<Metrics> Make(Metrics::Options options = {}) {
  auto m = Metrics::Create(options);
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(*m);
}

TEST(HistogramTest, RendersCumulativeBucketsSumAndCount) {
  Histogram h({1, 2, 4});
  h.Observe(0.5);
  h.Observe(1);  // le is inclusive
  h.Observe(3);
  h.Observe(100);
  std::string out;
  h.Render("x", "a=\"b\"", &out);
  EXPECT_EQ(out,
            "x_bucket{a=\"b\",le=\"1\"} 2\n"
            "x_bucket{a=\"b\",le=\"2\"} 2\n"
            "x_bucket{a=\"b\",le=\"4\"} 3\n"
            "x_bucket{a=\"b\",le=\"+Inf\"} 4\n"
            "x_sum{a=\"b\"} 104.5\n"
            "x_count{a=\"b\"} 4\n");
}

TEST(MetricsTest, RequestsByMethodAndCode) {
  auto m = Make();
  m->RecordRequest("/vocabd.v1.EmbeddingService/Embed", "OK", 0.002);
  m->RecordRequest("/vocabd.v1.EmbeddingService/Embed", "OK", 0.003);
  m->RecordRequest("/vocabd.v1.EmbeddingService/Embed", "INVALID_ARGUMENT", 0.0001);
  EXPECT_EQ(m->requests("/vocabd.v1.EmbeddingService/Embed", "OK"), 2u);
  EXPECT_EQ(m->requests("/vocabd.v1.EmbeddingService/Embed", "INVALID_ARGUMENT"), 1u);
  EXPECT_EQ(m->requests("/vocabd.v1.EmbeddingService/Embed", "INTERNAL"), 0u);
  const std::string text = m->Render();
  EXPECT_THAT(text, HasSubstr("# TYPE vocabd_requests_total counter\n"));
  EXPECT_THAT(text, HasSubstr("vocabd_requests_total{method=\"/vocabd.v1.EmbeddingService/"
                              "Embed\",code=\"OK\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("vocabd_requests_total{method=\"/vocabd.v1.EmbeddingService/"
                              "Embed\",code=\"INVALID_ARGUMENT\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("vocabd_request_duration_seconds_bucket{method=\"/vocabd.v1."
                              "EmbeddingService/Embed\",le=\"0.0025\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("vocabd_request_duration_seconds_count{method=\"/vocabd.v1."
                              "EmbeddingService/Embed\"} 3\n"));
}

TEST(MetricsTest, GaugesCountersAndBuildInfo) {
  auto m = Make();
  m->AddInFlight(3);
  m->AddInFlight(-1);
  EXPECT_EQ(m->in_flight(), 2);
  int64_t depth = 7;
  m->SetQueueDepthSource("compute", [&depth] { return depth; });
  m->ObserveBatchSize(3);
  m->ObserveBatchSize(300);
  m->RecordSkippedWork("cancelled");
  m->RecordRejected("max_tokens_per_request");
  m->RecordRejected("max_tokens_per_request");
  m->SetModelResidentBytes("m1", 12345);
  m->SetModelResidentBytes("gone", 1);
  m->RemoveModel("gone");
  m->SetBuildInfo({{"version", "1.2.3"}, {"git_sha", "a\"b"}});
  std::string text = m->Render();
  EXPECT_THAT(text, HasSubstr("vocabd_in_flight_requests 2\n"));
  EXPECT_THAT(text, HasSubstr("vocabd_queue_depth{queue=\"compute\"} 7\n"));
  depth = 0;
  EXPECT_THAT(m->Render(), HasSubstr("vocabd_queue_depth{queue=\"compute\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("vocabd_batch_size_rows_bucket{le=\"4\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("vocabd_batch_size_rows_bucket{le=\"512\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("vocabd_batch_size_rows_count 2\n"));
  EXPECT_EQ(m->batch_count(), 2u);
  EXPECT_THAT(text, HasSubstr("vocabd_skipped_work_total{reason=\"cancelled\"} 1\n"));
  EXPECT_THAT(text,
              HasSubstr("vocabd_rejected_requests_total{limit=\"max_tokens_per_request\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("vocabd_model_resident_bytes{model=\"m1\"} 12345\n"));
  EXPECT_THAT(text, Not(HasSubstr("model=\"gone\"")));
  EXPECT_THAT(text, HasSubstr("vocabd_build_info{version=\"1.2.3\",git_sha=\"a\\\"b\"} 1\n"));
  m->SetQueueDepthSource("compute", nullptr);
  EXPECT_THAT(m->Render(), Not(HasSubstr("queue=\"compute\"")));
}

TEST(MetricsTest, EveryFamilyHasHelpAndType) {
  const std::string text = Make()->Render();
  for (const char* family :
       {"vocabd_build_info", "vocabd_requests_total", "vocabd_request_duration_seconds",
        "vocabd_in_flight_requests", "vocabd_queue_depth", "vocabd_batch_size_rows",
        "vocabd_skipped_work_total", "vocabd_rejected_requests_total",
        "vocabd_model_resident_bytes"}) {
    EXPECT_THAT(text, HasSubstr(std::string("# HELP ") + family + " ")) << family;
    EXPECT_THAT(text, HasSubstr(std::string("# TYPE ") + family + " ")) << family;
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

TEST(MetricsTest, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

}  // namespace
}  // namespace vocabd
