#include "lib/core/happens_before.h"
#include "server/http_gateway.h"

#include "server/request_info.h"

#include <httplib.h>
#include <openssl/crypto.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <chrono>
#include <future>
#include <utility>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/message.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>
#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "server/api_services.h"
#include "server/grpc_status.h"
#include "server/http_json.h"
#include "server/metrics_http.h"

namespace vocabd {
namespace {

constexpr char kPackage[] = "vocabd.v1.";
constexpr char kJson[] = "application/json";

void SendError(httplib::Response& res, grpc::StatusCode code, const std::string& message,
               int http_status = 0) {
  nlohmann::json body = {{"code", StatusCodeName(code)}, {"message", message}};
  res.status = http_status != 0 ? http_status : HttpStatusFor(code);
  // replace: a message quoting client bytes (a path with %FF) is not UTF-8;
  // dump() would throw and leave the connection unanswered.
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n",
                  kJson);
}

void SendError(httplib::Response& res, const absl::Status& status) {
  SendError(res, static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

// The unary RPCs of the registered vocabd.v1 services, for error messages.
std::string UnaryRpcList() {
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  std::string out;
  for (const char* service : kApiServices) {
    const auto* s = pool->FindServiceByName(service);
    if (s == nullptr) continue;
    for (int i = 0; i < s->method_count(); ++i) {
      const auto* m = s->method(i);
      if (m->client_streaming() || m->server_streaming()) continue;
      absl::StrAppend(&out, out.empty() ? "" : ", ", "/v1/", s->name(), "/", m->name());
    }
  }
  return out;
}

grpc::ByteBuffer ToByteBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

bool FromByteBuffer(const grpc::ByteBuffer& buffer, google::protobuf::Message* message) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return false;
  std::string bytes;
  bytes.reserve(buffer.Length());
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return message->ParseFromString(bytes);
}

bool WantsTensorValues(const httplib::Request& req) {
  return req.get_param_value("tensors") == "values" ||
         absl::EqualsIgnoreCase(req.get_header_value("X-Vocabd-Tensors"), "values");
}

}  // namespace

absl::Status CheckRequestIdHeader(std::string_view id) {
  return CheckRequestId(id, "X-Request-Id");
}

int HttpStatusFor(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return 200;
    case grpc::StatusCode::CANCELLED: return 499;
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE: return 400;
    case grpc::StatusCode::UNAUTHENTICATED: return 401;
    case grpc::StatusCode::PERMISSION_DENIED: return 403;
    case grpc::StatusCode::NOT_FOUND: return 404;
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::ABORTED: return 409;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return 429;
    case grpc::StatusCode::UNIMPLEMENTED: return 501;
    case grpc::StatusCode::UNAVAILABLE: return 503;
    case grpc::StatusCode::DEADLINE_EXCEEDED: return 504;
    default: return 500;  // UNKNOWN, INTERNAL, DATA_LOSS
  }
}

struct HttpGateway::State {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<grpc::GenericStub> stub;
  Metrics* metrics = nullptr;
  std::vector<std::string> tokens;  // empty = no token auth
  std::function<absl::StatusOr<std::string>()> ready;
  std::atomic<bool> draining{false};
  int64_t max_request_memory_bytes = 0;
  // Drain gate: requests between admission and the start of their
  // in-process call (see StartDraining).
  std::mutex gate_mu;
  std::condition_variable gate_cv;
  bool gate_closed = false;
  int starting = 0;

  bool Admit() {
    std::lock_guard<std::mutex> lock(gate_mu);
    if (gate_closed) return false;
    ++starting;
    return true;
  }
  void Started() {
    std::lock_guard<std::mutex> lock(gate_mu);
    if (--starting == 0) gate_cv.notify_all();
  }
  void CloseGate() {
    std::unique_lock<std::mutex> lock(gate_mu);
    gate_closed = true;
    gate_cv.wait(lock, [this] { return starting == 0; });
  }

  // Before the body is read: the media type, and the drain.
  std::optional<HttpRefusal> CheckHead(const HttpHead& head) const {
    if (head.method != "POST") return std::nullopt;
    if (draining.load()) {
      return HttpRefusal{503, "UNAVAILABLE", "draining: the server is shutting down"};
    }
    const std::string* type = head.Find("Content-Type");
    if (type == nullptr) {
      return HttpRefusal{415, "INVALID_ARGUMENT",
                         "POST bodies need Content-Type: application/json (none was sent)"};
    }
    std::vector<absl::string_view> parts = absl::StrSplit(*type, ';');
    const absl::string_view media = absl::StripAsciiWhitespace(parts[0]);
    if (!absl::EqualsIgnoreCase(media, kJson)) {
      return HttpRefusal{415, "INVALID_ARGUMENT",
                         absl::StrCat("Content-Type '", absl::CHexEscape(type->substr(0, 100)),
                                      "' is not accepted: POST bodies need Content-Type: "
                                      "application/json")};
    }
    for (size_t i = 1; i < parts.size(); ++i) {
      std::vector<absl::string_view> kv = absl::StrSplit(parts[i], absl::MaxSplits('=', 1));
      if (kv.size() == 2 && absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(kv[0]), "charset")) {
        absl::string_view charset = absl::StripAsciiWhitespace(kv[1]);
        if (charset.size() >= 2 && charset.front() == '"' && charset.back() == '"') {
          charset = charset.substr(1, charset.size() - 2);
        }
        if (!absl::EqualsIgnoreCase(charset, "utf-8")) {
          return HttpRefusal{415, "INVALID_ARGUMENT",
                             absl::StrCat("Content-Type charset '",
                                          absl::CHexEscape(std::string(charset).substr(0, 40)),
                                          "' is not accepted: JSON bodies must be UTF-8")};
        }
      }
    }
    return std::nullopt;
  }

  // Empty when the request may pass, else the refusal message.
  std::string CheckToken(const httplib::Request& req) const {
    if (tokens.empty()) return "";
    if (!req.has_header("Authorization")) {
      return "missing Authorization header: send 'Authorization: Bearer <token>'";
    }
    const std::string value = req.get_header_value("Authorization");
    constexpr char kBearer[] = "Bearer ";
    if (!absl::StartsWith(value, kBearer)) {
      return "Authorization header must have the form 'Bearer <token>'";
    }
    const std::string token = value.substr(sizeof(kBearer) - 1);
    bool match = false;
    for (const std::string& allowed : tokens) {
      // Constant time for equal lengths; lengths are not secret.
      if (allowed.size() == token.size() &&
          CRYPTO_memcmp(allowed.data(), token.data(), token.size()) == 0) {
        match = true;
      }
    }
    return match ? "" : "bearer token is not accepted";
  }

  // Token check for the paths that need it; refusals are answered and
  // counted (as the gRPC token processor counts its refusals).
  bool Refused(const httplib::Request& req, httplib::Response& res, const std::string& method,
               std::chrono::steady_clock::time_point start) const {
    const std::string refusal = CheckToken(req);
    if (refusal.empty()) return false;
    if (!method.empty()) {
      metrics->RecordRequest(
          method, "UNAUTHENTICATED",
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    res.set_header("WWW-Authenticate", "Bearer");
    SendError(res, grpc::StatusCode::UNAUTHENTICATED, refusal);
    return true;
  }

  void Rpc(const httplib::Request& req, httplib::Response& res) {
    const auto start = std::chrono::steady_clock::now();
    // No in-process call may start once the drain began: the gRPC server is
    // shutting down behind it (calling it then crashed the process).
    if (!Admit()) {
      res.set_header("Connection", "close");
      SendError(res, grpc::StatusCode::UNAVAILABLE, "draining: the server is shutting down");
      return;
    }
    struct Admission {
      State* state;
      bool held = true;
      void Release() {
        if (held) state->Started();
        held = false;
      }
      ~Admission() { Release(); }
    } admission{this};
    HttpExchange* exchange = CurrentHttpExchange();
    const std::string& body = exchange != nullptr ? exchange->body : req.body;
    const std::string service = req.matches[1];
    const std::string method_name = req.matches[2];
    const std::string method = absl::StrCat("/", kPackage, service, "/", method_name);
    const auto* pool = google::protobuf::DescriptorPool::generated_pool();
    const auto* service_desc = pool->FindServiceByName(absl::StrCat(kPackage, service));
    const auto* method_desc =
        service_desc == nullptr ? nullptr : service_desc->FindMethodByName(method_name);
    if (method_desc == nullptr) {
      SendError(res, grpc::StatusCode::NOT_FOUND,
                absl::StrCat("no RPC ", method.substr(1), "; unary RPCs: ", UnaryRpcList()));
      return;
    }
    if (Refused(req, res, method, start)) return;
    if (method_desc->client_streaming() || method_desc->server_streaming()) {
      SendError(res, grpc::StatusCode::UNIMPLEMENTED,
                absl::StrCat(method.substr(1),
                             " is a streaming RPC: gRPC only (use the unary RPC over HTTP)"));
      return;
    }
    auto* factory = google::protobuf::MessageFactory::generated_factory();
    const google::protobuf::Message* in_proto = factory->GetPrototype(method_desc->input_type());
    const google::protobuf::Message* out_proto =
        factory->GetPrototype(method_desc->output_type());
    if (in_proto == nullptr || out_proto == nullptr) {
      SendError(res, grpc::StatusCode::INTERNAL, "no message type for " + method);
      return;
    }
    std::unique_ptr<google::protobuf::Message> request(in_proto->New());
    std::unique_ptr<google::protobuf::Message> response(out_proto->New());
    if (absl::Status s = CheckJsonRequestCost(body, max_request_memory_bytes); !s.ok()) {
      SendError(res, s);
      return;
    }
    if (absl::Status s = JsonToMessage(body, request.get()); !s.ok()) {
      SendError(res, s);
      return;
    }
    grpc::ClientContext context;
    if (req.has_header("X-Request-Id")) {
      const std::string id = req.get_header_value("X-Request-Id");
      // gRPC aborts the process on a metadata value outside 0x20-0x7E
      // (GRPC_CALL_ERROR_INVALID_METADATA); HTTP allows TAB, DEL and
      // bytes >= 0x80 in a header value.
      if (absl::Status s = CheckRequestIdHeader(id); !s.ok()) {
        SendError(res, s);
        return;
      }
      context.AddMetadata("x-request-id", id);
    }
    context.AddMetadata("x-vocabd-http-peer",
                        absl::StrCat(req.remote_addr, ":", req.remote_port));
    if (req.has_header("X-Vocabd-Timeout-Ms")) {
      int64_t ms = 0;
      const std::string value = req.get_header_value("X-Vocabd-Timeout-Ms");
      if (!absl::SimpleAtoi(value, &ms) || ms <= 0 || ms > kMaxHttpTimeoutMs) {
        SendError(res, grpc::StatusCode::INVALID_ARGUMENT,
                  absl::StrCat("X-Vocabd-Timeout-Ms = '", absl::CHexEscape(value.substr(0, 64)),
                               "' must be a whole number of milliseconds in [1, ",
                               kMaxHttpTimeoutMs, "] (24 h)"));
        return;
      }
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(ms));
    }
    const grpc::ByteBuffer request_bytes = ToByteBuffer(request->SerializeAsString());
    grpc::ByteBuffer response_bytes;
    std::promise<grpc::Status> done;
    // gRPC (not instrumented) hands the call to its own thread: tell TSan.
    HappensBefore(&done);
    stub->UnaryCall(&context, method, grpc::StubOptions(), &request_bytes, &response_bytes,
                    [&done](grpc::Status status) {
                      HappensAfter(&done);
                      done.set_value(std::move(status));
                    });
    admission.Release();
    // The client hanging up cancels the call (its answer has nowhere to go;
    // an abandoned call held the compute pool as long as a live one).
    std::future<grpc::Status> result = done.get_future();
    while (result.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      if (exchange != nullptr && exchange->ClientGone()) {
        context.TryCancel();
        break;
      }
    }
    const grpc::Status status = result.get();
    if (!status.ok()) {
      SendError(res, status.error_code(), status.error_message());
      return;
    }
    if (!FromByteBuffer(response_bytes, response.get())) {
      SendError(res, grpc::StatusCode::INTERNAL, "cannot parse the response of " + method);
      return;
    }
    if (absl::Status s = CheckJsonAnswerCost(*response, max_request_memory_bytes); !s.ok()) {
      SendError(res, s);
      return;
    }
    absl::StatusOr<std::string> json = MessageToJson(*response, WantsTensorValues(req));
    if (!json.ok()) {
      SendError(res, json.status());
      return;
    }
    res.status = 200;
    res.set_content(*json + "\n", kJson);
  }
};

absl::Status HttpGateway::Options::Validate() const {
  std::string host;
  int port = 0;
  if (absl::Status s = SplitHostPort(listen_address, "--http-listen", &host, &port); !s.ok()) {
    return s;
  }
  if (absl::Status s = limits.Validate(); !s.ok()) return s;
  if (!ready) return absl::InvalidArgumentError("HttpGateway::Options::ready is not set");
  return security.Validate();
}

absl::StatusOr<std::unique_ptr<HttpGateway>> HttpGateway::Create(
    const Options& options, std::shared_ptr<grpc::Channel> channel, Metrics* metrics) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  std::string host;
  int port = 0;
  if (absl::Status s = SplitHostPort(options.listen_address, "--http-listen", &host, &port);
      !s.ok()) {
    return s;
  }
  BuildApiDescriptors();  // before the connection threads (server/api_services.h)
  std::unique_ptr<HttpGateway> gateway(new HttpGateway());
  auto state = std::make_shared<State>();
  state->channel = std::move(channel);
  state->stub = std::make_unique<grpc::GenericStub>(state->channel);
  state->metrics = metrics;
  state->ready = options.ready;
  state->max_request_memory_bytes = options.max_request_memory_bytes;
  if (!options.security.auth_token_file.empty()) {
    auto tokens = ReadTokenFile(options.security.auth_token_file);
    if (!tokens.ok()) return tokens.status();
    state->tokens = std::move(*tokens);
  }
  gateway->state_ = state;
  HttpGuardOptions guard_options;
  guard_options.limits = options.limits;
  if (guard_options.limits.max_body_bytes == 0) {
    guard_options.limits.max_body_bytes = 4 * options.max_receive_message_bytes;
    guard_options.body_limit_source = "4 x --max-receive-message-bytes";
    if (options.max_request_memory_bytes > 0 &&
        options.max_request_memory_bytes / 6 < guard_options.limits.max_body_bytes) {
      guard_options.limits.max_body_bytes = std::max<int64_t>(options.max_request_memory_bytes / 6, 1024);
      guard_options.body_limit_source =
          "--max-request-memory-bytes / 6: a JSON body needs 6 x its size to convert";
    }
  }
  guard_options.check_head = [s = state.get()](const HttpHead& head, int64_t) {
    return s->CheckHead(head);
  };
  const bool tls = options.security.tls();
  const std::string& ca = options.security.tls_client_ca_file;
  GuardedHttpServer guarded =
      NewGuardedHttpServer(guard_options, tls ? options.security.tls_cert_file : "",
                           tls ? options.security.tls_key_file : "", tls ? ca : "");
  if (tls && !guarded.server->is_valid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http-listen: cannot set up TLS from --tls-cert = '", options.security.tls_cert_file,
        "', --tls-key = '", options.security.tls_key_file, "'",
        ca.empty() ? std::string() : absl::StrCat(", --tls-client-ca = '", ca, "'"),
        " (unreadable or not PEM, or the key does not match the certificate)"));
  }
  gateway->http_ = std::move(guarded.server);
  gateway->guard_ = std::move(guarded.guard);
  gateway->tls_ = tls;
  httplib::Server& http = *gateway->http_;
  // A thread per connection up to the connection limit, plus a few for the
  // connections over it, which are answered 503 at once.
  http.new_task_queue = [n = static_cast<size_t>(options.limits.max_connections)] {
    return NewConnectionThreads(n + 16);
  };
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler's own (JSON) answer
    if (res.status == 404) {
      SendError(res, grpc::StatusCode::NOT_FOUND,
                absl::StrCat("no such path ", req.method, " ", req.path,
                             "; RPCs are POST /v1/<Service>/<Method> (", UnaryRpcList(),
                             "), health GET /healthz and /readyz, metrics GET /metrics"));
    } else if (res.status >= 400) {
      SendError(res, grpc::StatusCode::INVALID_ARGUMENT,
                absl::StrCat("HTTP ", res.status, " for ", req.method, " ", req.path), res.status);
    }
  });
  http.Post(R"(/v1/([A-Za-z0-9_]+)/([A-Za-z0-9_]+))",
            [state](const httplib::Request& req, httplib::Response& res) { state->Rpc(req, res); });
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("{\"status\":\"SERVING\"}\n", kJson);
  });
  http.Get("/readyz", [state](const httplib::Request&, httplib::Response& res) {
    if (state->draining.load()) {
      SendError(res, grpc::StatusCode::UNAVAILABLE, "draining: the server is shutting down");
      return;
    }
    absl::StatusOr<std::string> model = state->ready();
    if (!model.ok()) {
      SendError(res, grpc::StatusCode::UNAVAILABLE,
                absl::StrCat("default model not ready: ", model.status().message()));
      return;
    }
    res.set_content(nlohmann::json{{"status", "READY"}, {"model", *model}}.dump(
                        -1, ' ', false, nlohmann::json::error_handler_t::replace) +
                        "\n",
                    kJson);
  });
  http.Get("/metrics", [state](const httplib::Request& req, httplib::Response& res) {
    if (state->Refused(req, res, "", std::chrono::steady_clock::now())) return;
    res.set_content(state->metrics->Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  int listen_socket = -1;
  http.set_socket_options([&listen_socket](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_socket = sock;
  });
  if (port == 0) {
    gateway->port_ = http.bind_to_any_port(host);
  } else {
    gateway->port_ = http.bind_to_port(host, port) ? port : -1;
  }
  http.set_socket_options(httplib::default_socket_options);
  if (gateway->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("--http-listen = '", options.listen_address,
                                               "': cannot bind (address in use or invalid)"));
  }
  // httplib's fixed backlog of 5 (see server/metrics_http.cc).
  if (listen_socket >= 0) ::listen(listen_socket, SOMAXCONN);
  gateway->thread_ = std::thread([g = gateway.get()] { g->http_->listen_after_bind(); });
  return gateway;
}

HttpGateway::~HttpGateway() { Stop(); }

void HttpGateway::StartDraining() {
  if (!state_) return;
  state_->draining.store(true);
  if (guard_) GuardedHttpServer{nullptr, guard_}.BeginDrain();
  state_->CloseGate();
}

void HttpGateway::Stop() {
  StartDraining();
  if (http_ && thread_.joinable()) {
    // stop() is a no-op until the listener runs; give the thread time to start.
    for (int i = 0; i < 5000 && !http_->is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    http_->stop();
  }
  if (thread_.joinable()) thread_.join();
}

}  // namespace vocabd
