// Starts a real VocabdServer on 127.0.0.1:0 with the bundled models and a
// client connected to it.
#ifndef VOCABD_TESTS_SERVER_SERVER_FIXTURE_H_
#define VOCABD_TESTS_SERVER_SERVER_FIXTURE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include <gtest/gtest.h>

#include "client/vocabd_client.h"
#include "server/server.h"

namespace vocabd::testing {

// Models served: "stories260K" (llama2.c .bin, default, interleaved RoPE)
// and "stories260K-hf" (safetensors, half-split RoPE).
inline constexpr char kBinModel[] = "stories260K";
inline constexpr char kHfModel[] = "stories260K-hf";

// Starts one server for the whole test suite (SetUpTestSuite) and tears it
// down at the end.
class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite();
  static void TearDownTestSuite();
  static VocabdServer& server() { return *server_; }
  static VocabdClient& client() { return *client_; }

 private:
  static std::unique_ptr<VocabdServer> server_;
  static std::unique_ptr<VocabdClient> client_;
};

// A repository model folder `dir`: the stories260K-hf checkpoint with
// `tokenizer_json` as its tokenizer.json.
void WriteRepoModel(const std::string& dir, const std::string& tokenizer_json);

// ModelService.LoadModel(name) on `target`.
grpc::Status LoadRepoModel(const std::string& target, const std::string& name);

// A well-behaved caller beside an attack: runs `call` (one RPC, which sets
// its own deadline) every 50 ms on its own thread until stopped.
class ServingProbe {
 public:
  explicit ServingProbe(std::function<grpc::Status()> call);
  ~ServingProbe() { Stop(); }
  ServingProbe(const ServingProbe&) = delete;
  ServingProbe& operator=(const ServingProbe&) = delete;
  // Stops the probe; at least one call ran and every call answered OK.
  void ExpectAllAnswered(const std::string& what);

 private:
  void Stop();
  std::function<grpc::Status()> call_;
  void CallOnce();
  std::atomic<bool> stop_{false};
  int calls_ = 0;
  int failures_ = 0;
  std::string first_failure_;
  std::thread thread_;
};

}  // namespace vocabd::testing

#endif  // VOCABD_TESTS_SERVER_SERVER_FIXTURE_H_
