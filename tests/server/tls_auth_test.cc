// TLS, mutual TLS and bearer-token auth against the real server. The
// certificates are made at test time with the openssl CLI: a CA, a server
// certificate for 127.0.0.1/localhost, client certificates from the same CA
// and from an unrelated ("wrong") CA.
#include <cstdlib>
#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/vocabd_client.h"
#include "server/metrics.h"
#include "server/server.h"
#include "tests/server/prometheus_text.h"
#include "tests/server/server_fixture.h"
#include "tests/test_util.h"

namespace vocabd::testing {
namespace {

using ::testing::HasSubstr;

class TlsAuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir());
    const std::string d = *dir_;
    std::ofstream(d + "/server.ext") << "subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                                     << "extendedKeyUsage=serverAuth\n";
    std::ofstream(d + "/client.ext") << "extendedKeyUsage=clientAuth\n";
    std::ofstream(d + "/tokens") << "# accepted tokens\n\nold-token\n  s3cret-token  \n";
    const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    auto ca = [&](const std::string& name) {
      return "openssl req -x509 " + key + " -keyout " + d + "/" + name + ".key -out " + d +
             "/" + name + ".pem -days 2 -subj /CN=" + name +
             " -addext basicConstraints=critical,CA:TRUE"
             " -addext keyUsage=critical,keyCertSign,cRLSign";
    };
    auto leaf = [&](const std::string& name, const std::string& ca_name, const std::string& ext) {
      return "openssl req " + key + " -keyout " + d + "/" + name + ".key -out " + d + "/" + name +
             ".csr -subj /CN=" + name + " && openssl x509 -req -in " + d + "/" + name +
             ".csr -CA " + d + "/" + ca_name + ".pem -CAkey " + d + "/" + ca_name +
             ".key -CAcreateserial -days 2 -out " + d + "/" + name + ".pem -extfile " + d + "/" +
             ext;
    };
    const std::string script = ca("ca") + " && " + ca("wrong-ca") + " && " +
                               leaf("server", "ca", "server.ext") + " && " +
                               leaf("client", "ca", "client.ext") + " && " +
                               leaf("wrong-client", "wrong-ca", "client.ext");
    ASSERT_EQ(std::system(("(" + script + ") >" + d + "/openssl.log 2>&1").c_str()), 0)
        << ReadFileBytes(d + "/openssl.log");
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string F(const std::string& name) { return *dir_ + "/" + name; }

  static std::unique_ptr<VocabdServer> StartServer(bool mtls, bool token) {
    VocabdServer::Options options;
    options.listen_address = "127.0.0.1:0";
    options.models = {{kBinModel, Stories260KBin()}};
    options.security.tls_cert_file = F("server.pem");
    options.security.tls_key_file = F("server.key");
    if (mtls) options.security.tls_client_ca_file = F("ca.pem");
    if (token) options.security.auth_token_file = F("tokens");
    auto server = VocabdServer::Create(options);
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? std::move(*server) : nullptr;
  }
  static VocabdClient::Options ClientOptions(const VocabdServer& server) {
    VocabdClient::Options options;
    options.target = server.target();
    options.timeout = std::chrono::milliseconds(10000);
    return options;
  }
  static absl::Status EmbedWith(const VocabdClient::Options& options) {
    auto client = VocabdClient::Create(options);
    if (!client.ok()) return client.status();
    v1::EmbedRequest request;
    request.add_sequences()->add_token_ids(7);
    return (*client)->Embed(request).status();
  }

  static std::string* dir_;
};

std::string* TlsAuthTest::dir_ = nullptr;

TEST_F(TlsAuthTest, TlsServesTrustedClientsAndRefusesPlaintextAndWrongCa) {
  auto server = StartServer(/*mtls=*/false, /*token=*/false);
  ASSERT_NE(server, nullptr);
  VocabdClient::Options good = ClientOptions(*server);
  good.ca_file = F("ca.pem");
  EXPECT_TRUE(EmbedWith(good).ok()) << EmbedWith(good);
  good.target = "localhost:" + std::to_string(server->port());
  EXPECT_TRUE(EmbedWith(good).ok()) << EmbedWith(good);

  VocabdClient::Options plaintext = ClientOptions(*server);
  EXPECT_EQ(EmbedWith(plaintext).code(), absl::StatusCode::kUnavailable);

  VocabdClient::Options wrong_ca = ClientOptions(*server);
  wrong_ca.ca_file = F("wrong-ca.pem");
  EXPECT_EQ(EmbedWith(wrong_ca).code(), absl::StatusCode::kUnavailable);
  server->Shutdown();
}

TEST_F(TlsAuthTest, MutualTlsRequiresAClientCertificateFromTheCa) {
  auto server = StartServer(/*mtls=*/true, /*token=*/false);
  ASSERT_NE(server, nullptr);
  VocabdClient::Options options = ClientOptions(*server);
  options.ca_file = F("ca.pem");
  EXPECT_EQ(EmbedWith(options).code(), absl::StatusCode::kUnavailable) << "no client cert";
  options.cert_file = F("wrong-client.pem");
  options.key_file = F("wrong-client.key");
  EXPECT_EQ(EmbedWith(options).code(), absl::StatusCode::kUnavailable) << "wrong CA";
  options.cert_file = F("client.pem");
  options.key_file = F("client.key");
  EXPECT_TRUE(EmbedWith(options).ok()) << EmbedWith(options);
  server->Shutdown();
}

TEST_F(TlsAuthTest, BearerTokenRequiredExceptForHealth) {
  auto server = StartServer(/*mtls=*/false, /*token=*/true);
  ASSERT_NE(server, nullptr);
  VocabdClient::Options options = ClientOptions(*server);
  options.ca_file = F("ca.pem");

  absl::Status missing = EmbedWith(options);
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnauthenticated) << missing;
  EXPECT_THAT(missing.message(), HasSubstr("missing authorization metadata"));

  options.token = "not-the-token";
  absl::Status wrong = EmbedWith(options);
  EXPECT_EQ(wrong.code(), absl::StatusCode::kUnauthenticated) << wrong;
  EXPECT_THAT(wrong.message(), HasSubstr("bearer token is not accepted"));

  // Health needs no token (probes, load balancers).
  options.token.clear();
  auto client = VocabdClient::Create(options);
  ASSERT_TRUE(client.ok());
  auto health = (*client)->HealthCheck();
  ASSERT_TRUE(health.ok()) << health.status();
  EXPECT_EQ(*health, "SERVING");
  // Reflection is not exempt.
  EXPECT_EQ((*client)->ListServices().status().code(), absl::StatusCode::kUnauthenticated);

  options.token = "s3cret-token";  // surrounding spaces in the file are ignored
  EXPECT_TRUE(EmbedWith(options).ok()) << EmbedWith(options);
  options.token = "old-token";  // any listed token (rotation)
  EXPECT_TRUE(EmbedWith(options).ok()) << EmbedWith(options);
  options.token.clear();
  std::ofstream(F("client-token")) << "s3cret-token\n";
  options.token_file = F("client-token");
  EXPECT_TRUE(EmbedWith(options).ok()) << EmbedWith(options);
  server->Shutdown();
}

// Refused calls end in the auth processor, before the interceptors; they
// are still counted once each in vocabd_requests_total.
TEST_F(TlsAuthTest, UnauthenticatedCallsAreCountedInRequestsTotal) {
  auto server = StartServer(/*mtls=*/false, /*token=*/true);
  ASSERT_NE(server, nullptr);
  VocabdClient::Options options = ClientOptions(*server);
  options.ca_file = F("ca.pem");
  EXPECT_EQ(EmbedWith(options).code(), absl::StatusCode::kUnauthenticated);
  options.token = "not-the-token";
  EXPECT_EQ(EmbedWith(options).code(), absl::StatusCode::kUnauthenticated);
  options.token = "s3cret-token";
  EXPECT_TRUE(EmbedWith(options).ok()) << EmbedWith(options);

  constexpr char kEmbed[] = "/vocabd.v1.EmbeddingService/Embed";
  const Metrics& metrics = server->metrics();
  EXPECT_EQ(metrics.requests(kEmbed, "UNAUTHENTICATED"), 2u);
  EXPECT_EQ(metrics.requests(kEmbed, "OK"), 1u);
  const PrometheusText p(metrics.Render());
  EXPECT_THAT(p.Value("vocabd_requests_total", {{"method", kEmbed}, {"code", "UNAUTHENTICATED"}}),
              ::testing::Optional(2.0));
  EXPECT_THAT(p.Value("vocabd_request_duration_seconds_count", {{"method", kEmbed}}),
              ::testing::Optional(3.0));
  server->Shutdown();
}

TEST_F(TlsAuthTest, BadSecurityFlagsFailCreateNamingTheFlag) {
  VocabdServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.models = {{kBinModel, Stories260KBin()}};
  options.security.auth_token_file = F("tokens");
  auto server = VocabdServer::Create(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(server.status().message(), HasSubstr("--auth-token-file"));
  EXPECT_THAT(server.status().message(), HasSubstr("needs TLS"));

  options.security = {};
  options.security.tls_cert_file = F("server.pem");
  server = VocabdServer::Create(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr("must be given together"));

  options.security.tls_key_file = F("missing.key");
  server = VocabdServer::Create(options);
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(server.status().message(), HasSubstr("--tls-key = '" + F("missing.key")));

  options.security.tls_key_file = F("server.key");
  std::ofstream(F("empty-tokens")) << "# nothing\n\n";
  options.security.auth_token_file = F("empty-tokens");
  server = VocabdServer::Create(options);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(server.status().message(), HasSubstr("holds no token"));
}

TEST_F(TlsAuthTest, ClientRefusesATokenWithoutTls) {
  VocabdClient::Options options;
  options.token = "t";
  auto client = VocabdClient::Create(options);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(client.status().message(), HasSubstr("needs TLS"));
  options = {};
  options.lb_policy = "random";
  client = VocabdClient::Create(options);
  ASSERT_FALSE(client.ok());
  EXPECT_THAT(client.status().message(), HasSubstr("lb_policy = 'random'"));
}

}  // namespace
}  // namespace vocabd::testing
