// Starts a real VocabdServer on 127.0.0.1:0 with the bundled models and a
// client connected to it.
#ifndef VOCABD_TESTS_SERVER_SERVER_FIXTURE_H_
#define VOCABD_TESTS_SERVER_SERVER_FIXTURE_H_

#include <memory>
#include <string>
#include <vector>

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

}  // namespace vocabd::testing

#endif  // VOCABD_TESTS_SERVER_SERVER_FIXTURE_H_
