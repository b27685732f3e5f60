// Runs the real `vocabd` binary: graceful drain under load on SIGTERM
// (health Watch sees NOT_SERVING, in-flight calls finish, no accepted call
// fails, exit 0 within --drain-timeout-ms), JSON request logs, startup build
// info, and `vocabctl` over TLS + token.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "proto/tensor_codec.h"
#include "client/vocabd_client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "lib/core/happens_before.h"
#include "tests/test_util.h"
#include "vocabd/v1/model.grpc.pb.h"

namespace vocabd::testing {
namespace {

using ::testing::HasSubstr;

// Every line of a JSON-format log, parsed (non-JSON lines fail the test).
std::vector<nlohmann::json> JsonLines(const std::string& text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << line;
    if (!j.is_discarded()) lines.push_back(std::move(j));
  }
  return lines;
}

class VocabdProcess {
 public:
  explicit VocabdProcess(std::vector<std::string> extra) {
    log_path_ = MakeTempDir() + "/vocabd.log";
    std::vector<std::string> args = {BinaryDir() + "/server/vocabd", "--listen", "127.0.0.1:0",
                                     "--model=stories260K=" + Stories260KBin()};
    args.insert(args.end(), extra.begin(), extra.end());
    pid_ = fork();
    if (pid_ == 0) {
      FILE* log = freopen(log_path_.c_str(), "w", stdout);
      if (log == nullptr) _exit(100);
      dup2(fileno(stdout), fileno(stderr));
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(101);
    }
    const std::regex re("listening on port ([0-9]+)");
    const std::regex metrics_re("metrics on http://[^ ]+ \\(port ([0-9]+)\\)");
    for (int i = 0; i < 600 && port_ == 0; ++i) {
      std::smatch m;
      const std::string text = ReadFileOrEmpty(log_path_);
      if (std::regex_search(text, m, metrics_re)) metrics_port_ = std::stoi(m[1]);
      if (std::regex_search(text, m, re)) port_ = std::stoi(m[1]);
      if (port_ == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~VocabdProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // SIGTERM, then the exit status (-1 if still running after `limit`).
  int TerminateAndWait(std::chrono::milliseconds limit, std::chrono::milliseconds* took) {
    const auto start = std::chrono::steady_clock::now();
    kill(pid_, SIGTERM);
    while (std::chrono::steady_clock::now() - start < limit) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        *took = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - start);
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  int metrics_port() const { return metrics_port_; }
  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  std::string log() const { return ReadFileOrEmpty(log_path_); }

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
  int metrics_port_ = 0;
};

v1::ScoreRequest ScoreRows(int64_t rows, const std::string& id) {
  v1::ScoreRequest request;
  std::vector<float> h(static_cast<size_t>(rows * 64));
  for (size_t i = 0; i < h.size(); ++i) h[i] = static_cast<float>((i * 31) % 17) / 8.0f - 1;
  *request.mutable_hidden() = EncodeFloatTensor(h, {rows, 64});
  request.set_request_id(id);
  return request;
}

TEST(DrainTest, SigtermUnderLoadFinishesEveryAcceptedCallAndExitsZero) {
  if (kThreadSanitizer) {
    // Under GCC 12's libtsan on glibc 2.36, joining this test's load threads
    // crashes inside glibc (pthread_join -> __nptl_deallocate_stack ->
    // list_del on a NULL link, every run, with no TSan report before it);
    // the same test passes in the Release and ASan+UBSan suites, and the
    // server side of drain runs under TSan in VocabdProcessTest and
    // DrainTest.OpenHealthWatch...
    GTEST_SKIP() << "crashes in glibc's pthread_join under libtsan (see comment)";
  }
  constexpr int kDrainMs = 20000;
  VocabdProcess vocabd({"--log-level", "debug", "--log-format", "json", "--compute-threads", "1",
                        "--dynamic-batching=false", "--drain-timeout-ms", std::to_string(kDrainMs),
                        "--metrics-listen", "127.0.0.1:0"});
  ASSERT_NE(vocabd.port(), 0) << vocabd.log();
  ASSERT_NE(vocabd.metrics_port(), 0) << vocabd.log();

  VocabdClient::Options options;
  options.target = vocabd.target();
  options.timeout = std::chrono::milliseconds(60000);
  auto client = VocabdClient::Create(options);
  ASSERT_TRUE(client.ok());

  // A health watcher sees NOT_SERVING when the drain starts.
  auto health = grpc::health::v1::Health::NewStub((*client)->channel());
  grpc::ClientContext watch_context;
  grpc::health::v1::HealthCheckRequest watch_request;
  auto watch = health->Watch(&watch_context, watch_request);
  grpc::health::v1::HealthCheckResponse update;
  ASSERT_TRUE(watch->Read(&update));
  ASSERT_EQ(update.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  std::atomic<bool> saw_not_serving{false};
  std::thread watcher([&] {
    grpc::health::v1::HealthCheckResponse u;
    while (watch->Read(&u)) {
      if (u.status() == grpc::health::v1::HealthCheckResponse::NOT_SERVING) {
        saw_not_serving = true;
      }
    }
    // The server ends the Watch itself once the drain began (see
    // OpenHealthWatchSeesNotServingAndDoesNotHoldTheDrain).
  });

  // A long call (one 100000-row GEMM) is in flight when SIGTERM arrives: its
  // GEMM has started once the batch-size histogram has a row above 8192.
  absl::Status long_status;
  // (vocabd itself is the TSan build in the TSan suite: fewer rows, still
  // above the 8192-row histogram bucket the check below relies on.)
  std::thread long_call([&] {
    long_status = (*client)->Score(ScoreRows(TsanScaled(100000, 10000), "long")).status();
  });
  httplib::Client http("127.0.0.1", vocabd.metrics_port());
  auto long_started = [&] {
    auto res = http.Get("/metrics");
    if (!res) return false;
    std::smatch inf, le8192;
    static const std::regex inf_re("vocabd_batch_size_rows_bucket\\{le=\"\\+Inf\"\\} ([0-9]+)");
    static const std::regex le_re("vocabd_batch_size_rows_bucket\\{le=\"8192\"\\} ([0-9]+)");
    return std::regex_search(res->body, inf, inf_re) && std::regex_search(res->body, le8192, le_re) &&
           std::stoi(inf[1]) > std::stoi(le8192[1]);
  };
  for (int i = 0; i < 6000 && !long_started(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_TRUE(long_started()) << vocabd.log();

  // Load: 4 threads send Score/Embed calls back to back until one is refused.
  std::mutex mu;
  std::map<std::string, int> client_codes;  // status code name -> count
  std::set<std::string> client_ok_ids;
  std::atomic<int> ok_calls{0};
  std::vector<std::thread> load;
  for (int t = 0; t < 4; ++t) {
    load.emplace_back([&, t] {
      for (int i = 0;; ++i) {
        const std::string id = "load-" + std::to_string(t) + "-" + std::to_string(i);
        absl::Status s;
        if (i % 2 == 0) {
          s = (*client)->Score(ScoreRows(t == 0 ? 2000 : 500, id)).status();
        } else {
          v1::EmbedRequest e;
          e.add_sequences()->add_token_ids(i % 512);
          e.set_request_id(id);
          s = (*client)->Embed(e).status();
        }
        std::lock_guard<std::mutex> lock(mu);
        ++client_codes[absl::StatusCodeToString(s.code())];
        if (s.ok()) {
          client_ok_ids.insert(id);
          ++ok_calls;
        } else {
          return;
        }
      }
    });
  }
  while (ok_calls < 20) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));

  std::chrono::milliseconds took{0};
  const int exit_code = vocabd.TerminateAndWait(std::chrono::milliseconds(kDrainMs + 10000), &took);
  for (auto& t : load) t.join();
  long_call.join();
  watch_context.TryCancel();
  watcher.join();

  EXPECT_EQ(exit_code, 0) << vocabd.log();
  EXPECT_LT(took.count(), kDrainMs);
  EXPECT_TRUE(saw_not_serving);
  EXPECT_TRUE(long_status.ok()) << long_status;
  // Calls either succeeded or were refused as the server stopped accepting:
  // UNAVAILABLE (connection closed / GOAWAY) or CANCELLED (a stream gRPC core
  // cancels because it arrived after shutdown began, before any handler ran;
  // such calls have no server log line, checked below).
  for (const auto& [code, n] : client_codes) {
    EXPECT_TRUE(code == "OK" || code == "UNAVAILABLE" || code == "CANCELLED")
        << n << " calls ended " << code;
  }

  // The server logged every call it accepted, and each one finished OK;
  // calls that arrived once the drain began were refused UNAVAILABLE before
  // any work.
  int logged_ok = 0;
  std::set<std::string> server_ok_ids;
  for (const nlohmann::json& line : JsonLines(vocabd.log())) {
    if (!line.contains("rpc") || line["rpc"].get<std::string>().rfind("vocabd.v1.", 0) != 0) {
      continue;
    }
    if (line["status"] == "UNAVAILABLE") {
      EXPECT_THAT(line.value("error", ""), HasSubstr("vocabd is draining")) << line.dump();
      continue;
    }
    EXPECT_EQ(line["status"], "OK") << line.dump();
    if (line["status"] == "OK") {
      ++logged_ok;
      server_ok_ids.insert(line.value("id", ""));
    }
  }
  client_ok_ids.insert("long");
  EXPECT_EQ(server_ok_ids, client_ok_ids) << vocabd.log();
  EXPECT_EQ(logged_ok, ok_calls.load() + 1) << "+1: the long call";
  EXPECT_THAT(vocabd.log(), HasSubstr("received SIGTERM"));
  EXPECT_THAT(vocabd.log(), HasSubstr("vocabd stopped"));
}

// grpc.health.v1 Health/Watch on the callback API: records every status and
// how the stream ended. The callback API keeps gRPC's pollers running in this
// process as any async client (or grpc-go, e.g. a kubelet probe) does. An
// idle synchronous-API client reads its socket only from gRPC's 5 s backup
// poller, so it would acknowledge the server's GOAWAY ping (which gRPC's
// graceful shutdown waits for) 5-10 s late and blur what is measured here.
class HealthWatch : public grpc::ClientReadReactor<grpc::health::v1::HealthCheckResponse> {
 public:
  HealthWatch(grpc::health::v1::Health::Stub* stub, const std::string& service) {
    request_.set_service(service);
    stub->async()->Watch(&context_, &request_, this);
    StartRead(&response_);
    HappensBefore(this);  // the callbacks run on gRPC threads
    StartCall();
  }
  void OnReadDone(bool ok) override {
    CallbackScope scope(this);
    if (!ok) return;  // OnDone follows
    {
      std::lock_guard<std::mutex> lock(mu_);
      statuses_.push_back(response_.status());
    }
    cv_.notify_all();
    StartRead(&response_);
  }
  void OnDone(const grpc::Status& status) override {
    HappensAfter(this);
    std::lock_guard<std::mutex> lock(mu_);
    end_ = status;
    done_ = true;
    cv_.notify_all();
  }
  // Waits up to `limit` for `n` statuses; returns whether they arrived.
  bool WaitForStatuses(size_t n, std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, limit, [&] { return statuses_.size() >= n || done_; }) &&
           statuses_.size() >= n;
  }
  // Waits up to `limit` for the end; cancels the call if it does not come.
  void WaitDone(std::chrono::milliseconds limit) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, limit, [&] { return done_; })) {
      context_.TryCancel();
      cv_.wait(lock, [&] { return done_; });
    }
  }
  std::vector<int> statuses() {
    std::lock_guard<std::mutex> lock(mu_);
    return statuses_;
  }
  grpc::Status end() {
    std::lock_guard<std::mutex> lock(mu_);
    return end_;
  }

 private:
  grpc::ClientContext context_;
  grpc::health::v1::HealthCheckRequest request_;
  grpc::health::v1::HealthCheckResponse response_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<int> statuses_;
  grpc::Status end_;
  bool done_ = false;
};

// An open grpc.health.v1 Watch stream must not hold the drain: on SIGTERM
// each watcher gets NOT_SERVING, then the server ends the stream
// (UNAVAILABLE) and exits 0 as soon as its calls are done, long before
// --drain-timeout-ms (gRPC's default health service kept Watch streams open,
// so the server waited the whole timeout for them).
TEST(DrainTest, OpenHealthWatchSeesNotServingAndDoesNotHoldTheDrain) {
  constexpr int kDrainMs = 60000;
  VocabdProcess vocabd({"--drain-timeout-ms", std::to_string(kDrainMs)});
  ASSERT_NE(vocabd.port(), 0) << vocabd.log();
  VocabdClient::Options options;
  options.target = vocabd.target();
  auto client = VocabdClient::Create(options);
  ASSERT_TRUE(client.ok());
  auto health = grpc::health::v1::Health::NewStub((*client)->channel());

  std::vector<std::unique_ptr<HealthWatch>> watchers;
  for (const char* service : {"", "vocabd.v1.ScoringService", "vocabd.v1.NoSuchService"}) {
    watchers.push_back(std::make_unique<HealthWatch>(health.get(), service));
    ASSERT_TRUE(watchers.back()->WaitForStatuses(1, std::chrono::seconds(30))) << service;
  }
  // The server answers calls while the watchers are open.
  v1::EmbedRequest embed;
  embed.add_sequences()->add_token_ids(1);
  ASSERT_TRUE((*client)->Embed(embed).ok());

  std::chrono::milliseconds took{0};
  const int exit_code = vocabd.TerminateAndWait(std::chrono::milliseconds(kDrainMs + 10000), &took);
  for (auto& w : watchers) w->WaitDone(std::chrono::seconds(10));

  EXPECT_EQ(exit_code, 0) << vocabd.log();
  // "Well before": the drain has nothing to wait for (~0.1 s here); 10 s
  // leaves room for sanitizer builds on a loaded 2-core machine.
  EXPECT_LT(took.count(), 10000) << vocabd.log();
  using R = grpc::health::v1::HealthCheckResponse;
  EXPECT_THAT(watchers[0]->statuses(), ::testing::ElementsAre(R::SERVING, R::NOT_SERVING));
  EXPECT_THAT(watchers[1]->statuses(), ::testing::ElementsAre(R::SERVING, R::NOT_SERVING));
  // As in gRPC's default service, a watch on an unknown service gets
  // NOT_SERVING too.
  EXPECT_THAT(watchers[2]->statuses(),
              ::testing::ElementsAre(R::SERVICE_UNKNOWN, R::NOT_SERVING));
  for (auto& w : watchers) {
    EXPECT_EQ(w->end().error_code(), grpc::StatusCode::UNAVAILABLE) << w->end().error_message();
  }
  EXPECT_THAT(vocabd.log(), HasSubstr("vocabd stopped"));
}

TEST(LoggingTest, JsonRequestLinesAndStartupBuildInfo) {
  VocabdProcess vocabd({"--log-level", "debug", "--log-format", "json"});
  ASSERT_NE(vocabd.port(), 0) << vocabd.log();
  VocabdClient::Options options;
  options.target = vocabd.target();
  auto client = VocabdClient::Create(options);
  ASSERT_TRUE(client.ok());
  v1::EmbedRequest request;
  request.set_request_id("req-42");
  request.add_sequences()->add_token_ids(1);
  request.mutable_sequences(0)->add_token_ids(403);
  request.add_sequences()->add_token_ids(407);
  ASSERT_TRUE((*client)->Embed(request).ok());
  v1::EmbedRequest bad;
  bad.set_model("nope");
  bad.add_sequences()->add_token_ids(1);
  EXPECT_EQ((*client)->Embed(bad).status().code(), absl::StatusCode::kNotFound);
  std::chrono::milliseconds took{0};
  ASSERT_EQ(vocabd.TerminateAndWait(std::chrono::seconds(20), &took), 0);

  const std::vector<nlohmann::json> lines = JsonLines(vocabd.log());
  bool saw_request = false, saw_bad = false, saw_build = false, saw_model = false;
  for (const nlohmann::json& line : lines) {
    ASSERT_TRUE(line.contains("ts") && line.contains("level") && line.contains("msg"));
    if (line.value("id", "") == "req-42") {
      saw_request = true;
      EXPECT_EQ(line["level"], "debug");
      EXPECT_EQ(line["rpc"], "vocabd.v1.EmbeddingService/Embed");
      EXPECT_EQ(line["model"], "(default)");
      EXPECT_EQ(line["rows"], "3");
      EXPECT_EQ(line["status"], "OK");
      EXPECT_GT(std::stod(line["latency_ms"].get<std::string>()), 0.0);
    }
    if (line.value("model", "") == "nope" && line.contains("rpc")) {
      saw_bad = true;
      EXPECT_EQ(line["status"], "NOT_FOUND");
      EXPECT_THAT(line["msg"].get<std::string>(), HasSubstr("nope"));
      EXPECT_THAT(line["id"].get<std::string>(), ::testing::StartsWith("srv-"));
    }
    const std::string msg = line["msg"];
    if (msg.rfind("vocabd starting:", 0) == 0) {
      saw_build = true;
      EXPECT_TRUE(line.contains("version") && line.contains("git_sha") &&
                  line.contains("compiler") && line.contains("onednn"))
          << line.dump();
    }
    if (line.value("model", "") == "stories260K" && line.value("vocab_size", "") == "512") {
      saw_model = true;
    }
  }
  EXPECT_TRUE(saw_request) << vocabd.log();
  EXPECT_TRUE(saw_bad) << vocabd.log();
  EXPECT_TRUE(saw_build) << vocabd.log();
  EXPECT_TRUE(saw_model) << vocabd.log();
}


// A shard that is a FIFO: opening it for reading would block LoadModel
// forever (the name would stay LOADING and SIGTERM would never finish the
// drain). The load is refused before the open, at once, and the drain is
// not held.
TEST(DrainTest, FifoShardLoadIsRefusedAtOnceAndSigtermStillDrains) {
  namespace fs = std::filesystem;
  const std::string root = MakeTempDir() + "/repo";
  fs::create_directories(root + "/fifo");
  fs::copy_file(Stories260KHfDir() + "/config.json", root + "/fifo/config.json");
  std::ofstream(root + "/fifo/model.safetensors.index.json")
      << R"({"weight_map": {"model.embed_tokens.weight": "model-00001-of-00001.safetensors"}})";
  const std::string fifo = root + "/fifo/model-00001-of-00001.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  VocabdProcess vocabd({"--model-repository", root, "--drain-timeout-ms", "30000"});
  ASSERT_NE(vocabd.port(), 0) << vocabd.log();
  auto channel = grpc::CreateChannel(vocabd.target(), grpc::InsecureChannelCredentials());
  auto models = v1::ModelService::NewStub(channel);
  for (int attempt = 0; attempt < 2; ++attempt) {  // a retry: same answer, not "already loading"
    const int64_t rss_before = VmRssBytes(vocabd.pid());
    const auto start = std::chrono::steady_clock::now();
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    v1::LoadModelRequest request;
    request.set_name("fifo");
    v1::ModelInfo info;
    grpc::Status s = models->LoadModel(&ctx, request, &info);
    EXPECT_LT(std::chrono::steady_clock::now() - start,
              std::chrono::milliseconds(1000) * testing::kSanitizerSlowdown);
    EXPECT_RSS_LT(VmRssBytes(vocabd.pid()) - rss_before, int64_t{16} << 20);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_THAT(s.error_message(), HasSubstr(fifo + " is a FIFO (named pipe), not a regular file"));
    grpc::ClientContext get_ctx;
    v1::GetModelRequest get;
    get.set_name("fifo");
    ASSERT_TRUE(models->GetModel(&get_ctx, get, &info).ok());
    EXPECT_EQ(info.state(), v1::FAILED);
  }
  // Close the client first: an idle synchronous client would answer the
  // drain's GOAWAY ping only after gRPC's 5 s backup poll (see docs/operating.md,
  // "Graceful drain and health").
  models.reset();
  channel.reset();
  std::chrono::milliseconds took{0};
  ASSERT_EQ(vocabd.TerminateAndWait(std::chrono::seconds(20), &took), 0) << vocabd.log();
  EXPECT_LT(took.count(), 2000) << "the 30 s drain timeout must not be needed";
  EXPECT_THAT(vocabd.log(), HasSubstr("vocabd stopped"));
}

// Client-controlled text (request id, model name, the error message that
// quotes them) cannot forge log fields or lines: fields are structured data,
// never re-parsed from the message (server/logging.h).
constexpr char kForgedModel[] = "x\" status=OK rows=9 rpc=forged\n{\"level\":\"error\",\"rpc\":\"forged\"}";
constexpr char kForgedId[] = "id\" rpc=forged status=OK latency_ms=0 ";

void SendForgingEmbed(const std::string& target) {
  VocabdClient::Options options;
  options.target = target;
  auto client = VocabdClient::Create(options);
  ASSERT_TRUE(client.ok());
  v1::EmbedRequest bad;
  bad.set_model(kForgedModel);
  bad.set_request_id(kForgedId);
  bad.add_sequences()->add_token_ids(1);
  EXPECT_EQ((*client)->Embed(bad).status().code(), absl::StatusCode::kNotFound);
}

TEST(LoggingTest, ClientTextCannotForgeJsonFields) {
  VocabdProcess vocabd({"--log-level", "debug", "--log-format", "json"});
  ASSERT_NE(vocabd.port(), 0) << vocabd.log();
  SendForgingEmbed(vocabd.target());
  std::chrono::milliseconds took{0};
  ASSERT_EQ(vocabd.TerminateAndWait(std::chrono::seconds(20), &took), 0);
  int requests = 0;
  for (const nlohmann::json& line : JsonLines(vocabd.log())) {  // every line is JSON
    EXPECT_NE(line.value("rpc", ""), "forged") << line.dump();
    EXPECT_NE(line.value("level", ""), "error") << line.dump();
    if (!line.contains("rpc")) continue;
    ++requests;
    EXPECT_EQ(line["id"], kForgedId);
    EXPECT_EQ(line["model"], kForgedModel);
    EXPECT_EQ(line["rpc"], "vocabd.v1.EmbeddingService/Embed");
    EXPECT_EQ(line["status"], "NOT_FOUND");
    EXPECT_EQ(line["rows"], "1");
    EXPECT_NE(line["latency_ms"], "0");
    EXPECT_THAT(line["error"].get<std::string>(), HasSubstr("not found"));
  }
  EXPECT_EQ(requests, 1) << vocabd.log();
}

TEST(LoggingTest, ClientTextIsQuotedInTextLogs) {
  VocabdProcess vocabd({"--log-level", "debug", "--log-format", "text"});
  ASSERT_NE(vocabd.port(), 0) << vocabd.log();
  SendForgingEmbed(vocabd.target());
  std::chrono::milliseconds took{0};
  ASSERT_EQ(vocabd.TerminateAndWait(std::chrono::seconds(20), &took), 0);
  const std::string log = vocabd.log();
  // One line, the newline escaped, the quotes escaped inside quoted values.
  EXPECT_THAT(log, HasSubstr(" request id=\"id\\\" rpc=forged status=OK latency_ms=0 \" "
                             "rpc=vocabd.v1.EmbeddingService/Embed model=\"x\\\" status=OK "
                             "rows=9 rpc=forged\\n{\\\"level\\\":"));
  std::istringstream in(log);
  std::string line;
  while (std::getline(in, line)) {
    EXPECT_NE(line.rfind("{", 0), 0u) << "a forged line: " << line;
  }
}

// The vocabd binary with --http-listen: an HTTP call is logged like a gRPC
// call (its X-Request-Id as the id, the HTTP client as the peer), and
// SIGTERM still drains and exits 0.
TEST(LoggingTest, HttpCallsAreLoggedLikeGrpcCalls) {
  VocabdProcess vocabd(
      {"--log-level", "debug", "--log-format", "json", "--http-listen", "127.0.0.1:0"});
  ASSERT_NE(vocabd.port(), 0) << vocabd.log();
  std::smatch m;
  const std::string startup = vocabd.log();
  ASSERT_TRUE(std::regex_search(startup, m, std::regex("HTTP/JSON on http://[^ ]+ \\(port ([0-9]+)\\)")))
      << startup;
  httplib::Client http("127.0.0.1", std::stoi(m[1]));
  auto res = http.Post("/v1/EmbeddingService/Embed", {{"X-Request-Id", "http-7"}},
                       R"({"sequences": [{"tokenIds": [1, 403]}]})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  std::chrono::milliseconds took{0};
  ASSERT_EQ(vocabd.TerminateAndWait(std::chrono::seconds(20), &took), 0);
  bool saw = false;
  for (const nlohmann::json& line : JsonLines(vocabd.log())) {
    if (line.value("id", "") != "http-7") continue;
    saw = true;
    EXPECT_EQ(line["rpc"], "vocabd.v1.EmbeddingService/Embed");
    EXPECT_EQ(line["rows"], "2");
    EXPECT_EQ(line["status"], "OK");
    EXPECT_THAT(line.value("peer", ""), ::testing::StartsWith("http:127.0.0.1:")) << line.dump();
  }
  EXPECT_TRUE(saw) << vocabd.log();
}

TEST(LoggingTest, TextFormatAtInfoHasNoRequestLines) {
  VocabdProcess vocabd({"--log-level", "info"});
  ASSERT_NE(vocabd.port(), 0) << vocabd.log();
  auto [code, out] = RunCommand(BinaryDir() + "/client/vocabctl --target " + vocabd.target() +
                                " embed --ids 1,2");
  ASSERT_EQ(code, 0) << out;
  std::chrono::milliseconds took{0};
  ASSERT_EQ(vocabd.TerminateAndWait(std::chrono::seconds(20), &took), 0);
  EXPECT_THAT(vocabd.log(), ::testing::Not(HasSubstr("rpc=")));
  EXPECT_THAT(vocabd.log(), HasSubstr("[info]"));
}

// The start-up line counts the models actually loaded: --load-model ones
// too (it said "(1 model(s)" for the --model alone).
TEST(LoggingTest, StartupLineCountsLoadedRepositoryModels) {
  namespace fs = std::filesystem;
  const std::string root = MakeTempDir();
  fs::create_directories(root + "/hf");
  fs::copy_file(Stories260KHfDir() + "/config.json", root + "/hf/config.json");
  fs::copy_file(Stories260KHfDir() + "/model.safetensors", root + "/hf/model.safetensors");
  VocabdProcess vocabd({"--model-repository", root, "--load-model", "hf"});
  ASSERT_NE(vocabd.port(), 0) << vocabd.log();
  EXPECT_THAT(vocabd.log(), HasSubstr("(2 model(s), default 'stories260K'")) << vocabd.log();
  std::chrono::milliseconds took{0};
  EXPECT_EQ(vocabd.TerminateAndWait(std::chrono::seconds(20), &took), 0);
  fs::remove_all(root);
}

TEST(VocabctlTlsTest, HealthAndEmbedOverTlsWithToken) {
  const std::string d = MakeTempDir();
  const std::string script =
      "cd " + d +
      " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
      " -keyout ca.key -out ca.pem -days 2 -subj /CN=ca"
      " -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign"
      " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
      " -keyout server.key -out server.csr -subj /CN=localhost"
      " && printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > ext"
      " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial"
      " -days 2 -out server.pem -extfile ext && echo tok-1 > tokens";
  ASSERT_EQ(std::system(("(" + script + ") >/dev/null 2>&1").c_str()), 0);
  VocabdProcess vocabd({"--tls-cert", d + "/server.pem", "--tls-key", d + "/server.key",
                        "--auth-token-file", d + "/tokens"});
  ASSERT_NE(vocabd.port(), 0) << vocabd.log();
  const std::string vocabctl =
      BinaryDir() + "/client/vocabctl --target " + vocabd.target() + " --ca " + d + "/ca.pem ";
  auto [code, out] = RunCommand(vocabctl + "health");
  EXPECT_EQ(code, 0) << out;
  EXPECT_THAT(out, HasSubstr("SERVING"));
  auto [no_token_code, no_token] = RunCommand(vocabctl + "embed --ids 1 2>&1");
  EXPECT_EQ(no_token_code, 1) << no_token;
  EXPECT_THAT(no_token, HasSubstr("UNAUTHENTICATED"));
  auto [ok_code, ok_out] = RunCommand(vocabctl + "--token-file " + d + "/tokens embed --ids 1");
  EXPECT_EQ(ok_code, 0) << ok_out;
  auto [env_code, env_out] = RunCommand("VOCABD_TOKEN=tok-1 " + vocabctl + "embed --ids 1");
  EXPECT_EQ(env_code, 0) << env_out;
  auto [plain_code, plain] = RunCommand(BinaryDir() + "/client/vocabctl --timeout 3000 --target " +
                                        vocabd.target() + " health 2>&1");
  EXPECT_NE(plain_code, 0) << plain;
  std::chrono::milliseconds took{0};
  EXPECT_EQ(vocabd.TerminateAndWait(std::chrono::seconds(20), &took), 0);
}

}  // namespace
}  // namespace vocabd::testing
