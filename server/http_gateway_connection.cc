#include "server/http_gateway_connection.h"

#include <fcntl.h>
#include <httplib.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cstring>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace vocabd {

using Clock = std::chrono::steady_clock;

namespace {

thread_local HttpExchange* current_exchange = nullptr;

constexpr size_t kReadChunk = 64 << 10;
// What a refused connection may still send us before we close it (so the
// client reads the refusal instead of a reset).
constexpr size_t kLingerBytes = 1 << 20;
constexpr std::chrono::milliseconds kLingerTime{1000};
// Longest chunk-size line (hex size + extensions).
constexpr size_t kMaxChunkLineBytes = 4096;

const char* ReasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
  }
}

HttpRefusal Refuse(int status, std::string code, std::string message) {
  return HttpRefusal{status, std::move(code), std::move(message)};
}

std::string Printable(absl::string_view s, size_t max = 64) {
  return absl::CHexEscape(s.substr(0, max)) + (s.size() > max ? "..." : "");
}

int MillisLeft(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1 << 30));
}

// ------------------------------------------------------------ transport ----

enum class Wait { kReady, kTimeout, kStopped, kError };

// Waits until `fd` has `events`, `deadline` passes or (when stop_fd >= 0)
// stop_fd turns readable.
Wait PollFor(int fd, short events, Clock::time_point deadline, int stop_fd) {
  for (;;) {
    pollfd p[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
    const int n = ::poll(p, stop_fd >= 0 ? 2 : 1, MillisLeft(deadline));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Wait::kError;
    }
    if (p[0].revents != 0) return Wait::kReady;  // data, EOF or error: the read says
    if (n > 0 && stop_fd >= 0 && (p[1].revents & POLLIN)) return Wait::kStopped;
    if (n == 0) return Wait::kTimeout;
  }
}

}  // namespace

// Named (not in the anonymous namespace): HttpConnectionGuard::Connection,
// which has external linkage, holds a Transport*.
namespace http_internal {
// Non-blocking socket I/O with deadlines, plain or TLS.
class Transport {
 public:
  enum Result : ssize_t { kEof = 0, kError = -1, kTimeout = -2, kStopped = -3 };
  Transport(int fd, SSL* ssl) : fd_(fd), ssl_(ssl) {}
  ~Transport() {
    if (ssl_ != nullptr) {
      if (handshaken_) SSL_shutdown(ssl_);  // best effort close_notify
      SSL_free(ssl_);
    }
  }
  int fd() const { return fd_; }

  bool Handshake(Clock::time_point deadline) {
    if (ssl_ == nullptr) return true;
    for (;;) {
      const int r = SSL_do_handshake(ssl_);
      if (r == 1) {
        handshaken_ = true;
        return true;
      }
      const int err = SSL_get_error(ssl_, r);
      short events = err == SSL_ERROR_WANT_READ ? POLLIN : err == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
      if (events == 0 || PollFor(fd_, events, deadline, -1) != Wait::kReady) {
        ERR_clear_error();
        return false;
      }
    }
  }

  // > 0 bytes read into buf, or a Result.
  ssize_t Read(char* buf, size_t n, Clock::time_point deadline, int stop_fd) {
    for (;;) {
      short events = POLLIN;
      if (ssl_ == nullptr) {
        const ssize_t got = ::recv(fd_, buf, n, 0);
        if (got >= 0) return got;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return kError;
      } else {
        const int got = SSL_read(ssl_, buf, static_cast<int>(std::min<size_t>(n, 1 << 30)));
        if (got > 0) return got;
        const int err = SSL_get_error(ssl_, got);
        if (err == SSL_ERROR_ZERO_RETURN) return kEof;
        if (err == SSL_ERROR_WANT_WRITE) {
          events = POLLOUT;
        } else if (err != SSL_ERROR_WANT_READ) {
          ERR_clear_error();
          return err == SSL_ERROR_SYSCALL ? kEof : kError;
        }
      }
      switch (PollFor(fd_, events, deadline, stop_fd)) {
        case Wait::kReady: break;
        case Wait::kTimeout: return kTimeout;
        case Wait::kStopped: return kStopped;
        case Wait::kError: return kError;
      }
    }
  }

  // All of [p, p + n); false when the client took nothing for `timeout`
  // (or the connection failed).
  bool Write(const char* p, size_t n, std::chrono::milliseconds timeout) {
    while (n > 0) {
      short events = POLLOUT;
      ssize_t put = -1;
      if (ssl_ == nullptr) {
        put = ::send(fd_, p, n, MSG_NOSIGNAL);
        if (put < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
      } else {
        const int r = SSL_write(ssl_, p, static_cast<int>(std::min<size_t>(n, 1 << 30)));
        if (r > 0) {
          put = r;
        } else {
          const int err = SSL_get_error(ssl_, r);
          if (err == SSL_ERROR_WANT_READ) {
            events = POLLIN;
          } else if (err != SSL_ERROR_WANT_WRITE) {
            ERR_clear_error();
            return false;
          }
        }
      }
      if (put > 0) {
        p += put;
        n -= static_cast<size_t>(put);
        continue;
      }
      if (PollFor(fd_, events, Clock::now() + timeout, -1) != Wait::kReady) return false;
    }
    return true;
  }

 private:
  int fd_;
  SSL* ssl_;
  bool handshaken_ = false;
};

}  // namespace http_internal
using http_internal::Transport;

namespace {

// ------------------------------------------------------ httplib's view ----

// The stream httplib's process_request() reads the (already validated)
// request head from and writes its answer to.
class HeadStream final : public httplib::Stream {
 public:
  HeadStream(const std::string& head, Transport* transport, std::chrono::milliseconds timeout)
      : head_(head), transport_(transport), timeout_(timeout) {}
  bool is_readable() const override { return pos_ < head_.size(); }
  bool is_writable() const override { return !failed_; }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, head_.size() - pos_);
    std::memcpy(ptr, head_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    if (failed_ || !transport_->Write(ptr, size, timeout_)) {
      failed_ = true;
      return -1;
    }
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    Address(/*peer=*/true, ip, port);
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    Address(/*peer=*/false, ip, port);
  }
  // httplib (built without CPPHTTPLIB_USE_POLL) answers 500 to a socket at
  // or above FD_SETSIZE, which only its select() needs; this stream never
  // selects, so such a socket is not reported.
  socket_t socket() const override {
    return transport_->fd() < FD_SETSIZE ? transport_->fd() : INVALID_SOCKET;
  }
  bool failed() const { return failed_; }

 private:
  void Address(bool peer, std::string& ip, int& port) const {
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    const int r = peer ? ::getpeername(transport_->fd(), reinterpret_cast<sockaddr*>(&addr), &len)
                       : ::getsockname(transport_->fd(), reinterpret_cast<sockaddr*>(&addr), &len);
    if (r != 0) return;
    char host[NI_MAXHOST];
    char serv[NI_MAXSERV];
    if (::getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, host, sizeof(host), serv,
                      sizeof(serv), NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      ip = host;
      port = std::atoi(serv);
    }
  }

  const std::string& head_;
  size_t pos_ = 0;
  Transport* transport_;
  std::chrono::milliseconds timeout_;
  bool failed_ = false;
};

// ------------------------------------------------------------- parsing ----

bool IsTchar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

// Parses the head in [0, size) of `text` (ending with CRLF CRLF).
std::optional<HttpRefusal> ParseHead(absl::string_view text, const HttpLimits& limits,
                                     HttpHead* head) {
  if (const size_t nul = text.find('\0'); nul != absl::string_view::npos) {
    return Refuse(400, "INVALID_ARGUMENT",
                  absl::StrCat("request head byte ", nul, " is NUL (0x00)"));
  }
  std::vector<absl::string_view> lines = absl::StrSplit(text.substr(0, text.size() - 4), "\r\n");
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].find_first_of("\r\n") != absl::string_view::npos) {
      return Refuse(400, "INVALID_ARGUMENT",
                    absl::StrCat("request head line ", i + 1,
                                 " holds a bare CR or LF: lines must end with CRLF"));
    }
  }
  const absl::string_view request_line = lines[0];
  if (request_line.size() > kMaxRequestLineBytes) {
    return Refuse(414, "INVALID_ARGUMENT",
                  absl::StrCat("request line is ", request_line.size(),
                               " bytes; at most ", kMaxRequestLineBytes, " are accepted"));
  }
  std::vector<absl::string_view> parts = absl::StrSplit(request_line, ' ');
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty() ||
      !std::all_of(parts[0].begin(), parts[0].end(), IsTchar)) {
    return Refuse(400, "INVALID_ARGUMENT",
                  absl::StrCat("request line '", Printable(request_line),
                               "' is not 'METHOD TARGET HTTP/1.1'"));
  }
  if (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0") {
    if (absl::StartsWith(parts[2], "HTTP/")) {
      return Refuse(505, "INVALID_ARGUMENT",
                    absl::StrCat("HTTP version '", Printable(parts[2]),
                                 "' is not supported (HTTP/1.1 and HTTP/1.0 are)"));
    }
    return Refuse(400, "INVALID_ARGUMENT",
                  absl::StrCat("request line '", Printable(request_line),
                               "' is not 'METHOD TARGET HTTP/1.1'"));
  }
  head->method = std::string(parts[0]);
  head->target = std::string(parts[1]);
  head->version = std::string(parts[2]);
  if (lines.size() - 1 > static_cast<size_t>(limits.max_headers)) {
    return Refuse(431, "RESOURCE_EXHAUSTED",
                  absl::StrCat("request has ", lines.size() - 1, " header fields; at most ",
                               limits.max_headers, " are accepted (--http-max-headers)"));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const absl::string_view line = lines[i];
    if (line.size() > kMaxHeaderLineBytes) {
      return Refuse(431, "RESOURCE_EXHAUSTED",
                    absl::StrCat("header field ", i, " is ", line.size(), " bytes; at most ",
                                 kMaxHeaderLineBytes, " are accepted"));
    }
    const size_t colon = line.find(':');
    if (line.empty() || line[0] == ' ' || line[0] == '\t') {
      return Refuse(400, "INVALID_ARGUMENT",
                    absl::StrCat("header field ", i,
                                 " starts with whitespace (obsolete line folding is not accepted)"));
    }
    if (colon == absl::string_view::npos || colon == 0 ||
        !std::all_of(line.begin(), line.begin() + colon, IsTchar)) {
      return Refuse(400, "INVALID_ARGUMENT",
                    absl::StrCat("header field ", i, " '", Printable(line),
                                 "' is not 'Name: value'"));
    }
    head->headers.emplace_back(std::string(line.substr(0, colon)),
                               std::string(absl::StripAsciiWhitespace(line.substr(colon + 1))));
  }
  return std::nullopt;
}

// The body's framing: Content-Length (>= 0) or -1 for chunked.
std::optional<HttpRefusal> FrameBody(const HttpHead& head, int64_t* length) {
  std::optional<int64_t> content_length;
  bool chunked = false;
  for (const auto& [name, value] : head.headers) {
    if (absl::EqualsIgnoreCase(name, "Content-Length")) {
      for (absl::string_view item : absl::StrSplit(value, ',')) {
        item = absl::StripAsciiWhitespace(item);
        int64_t n = -1;
        if (item.empty() || item.size() > 18 ||
            !std::all_of(item.begin(), item.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
            !absl::SimpleAtoi(item, &n)) {
          return Refuse(400, "INVALID_ARGUMENT",
                        absl::StrCat("Content-Length '", Printable(value),
                                     "' is not a number of bytes"));
        }
        if (content_length.has_value() && *content_length != n) {
          return Refuse(400, "INVALID_ARGUMENT",
                        absl::StrCat("conflicting Content-Length values ", *content_length,
                                     " and ", n));
        }
        content_length = n;
      }
    } else if (absl::EqualsIgnoreCase(name, "Transfer-Encoding")) {
      if (!absl::EqualsIgnoreCase(value, "chunked") || chunked) {
        return Refuse(501, "UNIMPLEMENTED",
                      absl::StrCat("Transfer-Encoding '", Printable(value),
                                   "' is not supported (only a single 'chunked')"));
      }
      chunked = true;
    } else if (absl::EqualsIgnoreCase(name, "Content-Encoding") &&
               !absl::EqualsIgnoreCase(value, "identity")) {
      return Refuse(415, "INVALID_ARGUMENT",
                    absl::StrCat("Content-Encoding '", Printable(value),
                                 "' is not supported: send the body uncompressed"));
    }
  }
  if (chunked && content_length.has_value()) {
    return Refuse(400, "INVALID_ARGUMENT",
                  "both Transfer-Encoding: chunked and Content-Length: send one of them");
  }
  if (chunked && head.version == "HTTP/1.0") {
    return Refuse(400, "INVALID_ARGUMENT", "Transfer-Encoding: chunked in an HTTP/1.0 request");
  }
  *length = chunked ? -1 : content_length.value_or(0);
  return std::nullopt;
}

}  // namespace

const std::string* HttpHead::Find(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) return &value;
  }
  return nullptr;
}

bool HttpExchange::ClientGone() const {
  if (fd < 0) return false;
  pollfd p{fd, static_cast<short>(POLLRDHUP), 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

HttpExchange* CurrentHttpExchange() { return current_exchange; }

absl::Status HttpLimits::Validate() const {
  const auto bad = [](const char* flag, int64_t value, const char* rule) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " = ", value, " must be ", rule));
  };
  if (max_connections < 1) return bad("--http-max-connections", max_connections, ">= 1");
  if (max_header_bytes < 1024) return bad("--http-max-header-bytes", max_header_bytes, ">= 1024");
  if (max_headers < 1) return bad("--http-max-headers", max_headers, ">= 1");
  if (max_body_bytes < 0) return bad("--http-max-body-bytes", max_body_bytes, ">= 0 (0 = derived)");
  if (header_timeout_ms < 1) return bad("--http-header-timeout-ms", header_timeout_ms, ">= 1");
  if (body_timeout_ms < 1) return bad("--http-body-timeout-ms", body_timeout_ms, ">= 1");
  if (idle_timeout_ms < 1) return bad("--http-idle-timeout-ms", idle_timeout_ms, ">= 1");
  if (write_timeout_ms < 1) return bad("--http-write-timeout-ms", write_timeout_ms, ">= 1");
  return absl::OkStatus();
}

// ---------------------------------------------------------------- guard ----

class HttpConnectionGuard {
 public:
  explicit HttpConnectionGuard(HttpGuardOptions options)
      : options_(std::move(options)), stop_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~HttpConnectionGuard() {
    if (stop_fd_ >= 0) ::close(stop_fd_);
  }
  void BeginDrain() {
    draining_.store(true);
    const uint64_t one = 1;
    if (stop_fd_ >= 0) {
      [[maybe_unused]] const ssize_t n = ::write(stop_fd_, &one, sizeof(one));
    }
  }

  using Process = std::function<bool(httplib::Stream&, bool close_connection,
                                     bool& connection_closed)>;
  // Serves one accepted socket until it closes; closes it.
  void Serve(int fd, SSL_CTX* tls, const Process& process);

 private:
  struct Connection;
  void Run(Connection& c, const Process& process);
  std::optional<HttpRefusal> ReadHead(Connection& c, size_t* head_end, bool* quiet_close);
  std::optional<HttpRefusal> ReadBody(Connection& c, int64_t length, std::string* body);
  std::optional<HttpRefusal> ReadChunked(Connection& c, std::string* body,
                                         Clock::time_point deadline);
  // Reads more into c.buffer; a Transport::Result when nothing came.
  ssize_t Fill(Connection& c, Clock::time_point deadline, bool interruptible);
  void Answer(Connection& c, const HttpRefusal& refusal);

  const HttpGuardOptions options_;
  const int stop_fd_;
  std::atomic<bool> draining_{false};
  std::atomic<int> open_{0};
};

struct HttpConnectionGuard::Connection {
  Transport* transport;
  std::string buffer;  // received, not yet consumed
  size_t scanned = 0;  // buffer[0, scanned) holds no end of head
  Clock::time_point head_deadline;
};

ssize_t HttpConnectionGuard::Fill(Connection& c, Clock::time_point deadline, bool interruptible) {
  const size_t old = c.buffer.size();
  c.buffer.resize(old + kReadChunk);
  const ssize_t got = c.transport->Read(c.buffer.data() + old, kReadChunk, deadline,
                                        interruptible ? stop_fd_ : -1);
  c.buffer.resize(old + (got > 0 ? static_cast<size_t>(got) : 0));
  return got;
}

void HttpConnectionGuard::Answer(Connection& c, const HttpRefusal& refusal) {
  const std::string body =
      nlohmann::json{{"code", refusal.code}, {"message", refusal.message}}.dump(
          -1, ' ', false, nlohmann::json::error_handler_t::replace) +
      "\n";
  const std::string answer = absl::StrCat(
      "HTTP/1.1 ", refusal.http_status, " ", ReasonPhrase(refusal.http_status),
      "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
      "\r\nConnection: close\r\n\r\n", body);
  if (!c.transport->Write(answer.data(), answer.size(),
                          std::chrono::milliseconds(options_.limits.write_timeout_ms))) {
    return;
  }
  // Lingering close: stop sending, drop what the client still sends for a
  // bounded time, so it reads the answer instead of a reset.
  ::shutdown(c.transport->fd(), SHUT_WR);
  const auto until = Clock::now() + kLingerTime;
  size_t dropped = 0;
  char sink[16 << 10];
  while (dropped < kLingerBytes) {
    const ssize_t got = c.transport->Read(sink, sizeof(sink), until, -1);
    if (got <= 0) break;
    dropped += static_cast<size_t>(got);
  }
}

std::optional<HttpRefusal> HttpConnectionGuard::ReadHead(Connection& c, size_t* head_end,
                                                         bool* quiet_close) {
  const HttpLimits& limits = options_.limits;
  for (;;) {
    // RFC 9112 2.2: empty lines before a request line are ignored.
    size_t skip = 0;
    while (c.buffer.compare(skip, 2, "\r\n") == 0) skip += 2;
    if (skip > 0) {
      c.buffer.erase(0, skip);
      c.scanned = 0;
    }
    const size_t from = c.scanned >= 3 ? c.scanned - 3 : 0;
    const size_t end = c.buffer.find("\r\n\r\n", from);
    if (end != std::string::npos && end + 4 <= static_cast<size_t>(limits.max_header_bytes)) {
      *head_end = end + 4;
      c.scanned = 0;
      return std::nullopt;
    }
    if (end != std::string::npos || c.buffer.size() > static_cast<size_t>(limits.max_header_bytes)) {
      return Refuse(431, "RESOURCE_EXHAUSTED",
                    absl::StrCat("request head (request line and header fields) is larger than ",
                                 limits.max_header_bytes, " bytes (--http-max-header-bytes)"));
    }
    c.scanned = c.buffer.size();
    const ssize_t got = Fill(c, c.head_deadline, /*interruptible=*/false);
    if (got == Transport::kTimeout) {
      if (c.buffer.empty()) {
        *quiet_close = true;
        return HttpRefusal{};
      }
      return Refuse(408, "DEADLINE_EXCEEDED",
                    absl::StrCat("request head not complete within ", limits.header_timeout_ms,
                                 " ms (--http-header-timeout-ms)"));
    }
    if (got <= 0) {
      *quiet_close = true;
      return HttpRefusal{};
    }
  }
}

std::optional<HttpRefusal> HttpConnectionGuard::ReadChunked(Connection& c, std::string* body,
                                                            Clock::time_point deadline) {
  const int64_t max = options_.limits.max_body_bytes;
  const auto timed_out = [&] {
    return Refuse(408, "DEADLINE_EXCEEDED",
                  absl::StrCat("request body not complete within ",
                               options_.limits.body_timeout_ms, " ms (--http-body-timeout-ms)"));
  };
  const auto bad = [](std::string what) {
    return Refuse(400, "INVALID_ARGUMENT", "chunked request body: " + what);
  };
  // Reads until c.buffer holds a CRLF-terminated line; its length (without
  // CRLF) in *line_end.
  const auto line = [&](size_t limit, size_t* line_end) -> std::optional<HttpRefusal> {
    for (;;) {
      const size_t end = c.buffer.find("\r\n");
      if (end != std::string::npos && end <= limit) {
        *line_end = end;
        return std::nullopt;
      }
      if (c.buffer.size() > limit + 1) return bad(absl::StrCat("a line is longer than ", limit, " bytes"));
      const ssize_t got = Fill(c, deadline, false);
      if (got == Transport::kTimeout) return timed_out();
      if (got <= 0) return bad("the connection ended inside the body");
    }
  };
  size_t trailer_bytes = 0;
  for (;;) {
    size_t end = 0;
    if (auto r = line(kMaxChunkLineBytes, &end)) return r;
    const absl::string_view size_line = absl::string_view(c.buffer).substr(0, end);
    const absl::string_view hex = absl::StripAsciiWhitespace(size_line.substr(0, size_line.find(';')));
    uint64_t size = 0;
    if (hex.empty() || hex.size() > 15 ||
        !std::all_of(hex.begin(), hex.end(), [](char ch) { return std::isxdigit(static_cast<unsigned char>(ch)); })) {
      return bad(absl::StrCat("chunk size '", Printable(size_line), "' is not hexadecimal"));
    }
    for (char ch : hex) {
      const int digit = ch <= '9' ? ch - '0' : (std::tolower(static_cast<unsigned char>(ch)) - 'a' + 10);
      size = size * 16 + static_cast<uint64_t>(digit);
    }
    c.buffer.erase(0, end + 2);
    if (size == 0) break;
    if (body->size() + size > static_cast<uint64_t>(max)) {
      return Refuse(413, "RESOURCE_EXHAUSTED",
                    absl::StrCat("chunked request body is larger than the HTTP limit of ", max,
                                 " bytes (", options_.body_limit_source, ")"));
    }
    while (c.buffer.size() < size + 2) {
      // Move what arrived into the body as it comes (no buffer of `size`).
      if (c.buffer.size() > 0 && c.buffer.size() <= size) {
        body->append(c.buffer);
        size -= c.buffer.size();
        c.buffer.clear();
      }
      const ssize_t got = Fill(c, deadline, false);
      if (got == Transport::kTimeout) return timed_out();
      if (got <= 0) return bad("the connection ended inside the body");
    }
    if (c.buffer.compare(size, 2, "\r\n") != 0) return bad("a chunk does not end with CRLF");
    body->append(c.buffer, 0, size);
    c.buffer.erase(0, size + 2);
  }
  // Trailer fields (ignored), then the empty line.
  for (;;) {
    size_t end = 0;
    if (auto r = line(kMaxHeaderLineBytes, &end)) return r;
    trailer_bytes += end + 2;
    if (trailer_bytes > static_cast<size_t>(options_.limits.max_header_bytes)) {
      return Refuse(431, "RESOURCE_EXHAUSTED",
                    absl::StrCat("chunked body trailer is larger than ",
                                 options_.limits.max_header_bytes,
                                 " bytes (--http-max-header-bytes)"));
    }
    c.buffer.erase(0, end + 2);
    if (end == 0) return std::nullopt;
  }
}

std::optional<HttpRefusal> HttpConnectionGuard::ReadBody(Connection& c, int64_t length,
                                                         std::string* body) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(options_.limits.body_timeout_ms);
  if (length < 0) return ReadChunked(c, body, deadline);
  const size_t want = static_cast<size_t>(length);
  // Grows with what arrives (never reserves the declared length up front).
  while (body->size() + c.buffer.size() < want) {
    body->append(c.buffer);
    c.buffer.clear();
    const ssize_t got = Fill(c, deadline, false);
    if (got == Transport::kTimeout) {
      return Refuse(408, "DEADLINE_EXCEEDED",
                    absl::StrCat("request body not complete within ",
                                 options_.limits.body_timeout_ms, " ms (--http-body-timeout-ms): ",
                                 body->size() + c.buffer.size(), " of ", want, " bytes arrived"));
    }
    if (got <= 0) {
      return Refuse(400, "INVALID_ARGUMENT",
                    absl::StrCat("the connection ended after ", body->size() + c.buffer.size(),
                                 " of the ", want, " body bytes"));
    }
  }
  const size_t rest = want - body->size();
  body->append(c.buffer, 0, rest);
  c.buffer.erase(0, rest);
  return std::nullopt;
}

void HttpConnectionGuard::Run(Connection& c, const Process& process) {
  const HttpLimits& limits = options_.limits;
  bool first = true;
  for (int served = 0;; ++served) {
    if (c.buffer.empty()) {
      // Wait for the first byte of the next request; a drain ends the wait.
      const auto wait_until =
          first ? c.head_deadline
                : Clock::now() + std::chrono::milliseconds(limits.idle_timeout_ms);
      if (draining_.load()) return;
      if (Fill(c, wait_until, /*interruptible=*/true) <= 0) return;
    }
    if (!first) c.head_deadline = Clock::now() + std::chrono::milliseconds(limits.header_timeout_ms);
    first = false;
    size_t head_end = 0;
    bool quiet_close = false;
    if (std::optional<HttpRefusal> r = ReadHead(c, &head_end, &quiet_close)) {
      if (!quiet_close) Answer(c, *r);
      return;
    }
    HttpHead head;
    if (std::optional<HttpRefusal> r =
            ParseHead(absl::string_view(c.buffer).substr(0, head_end), limits, &head)) {
      Answer(c, *r);
      return;
    }
    int64_t length = 0;
    if (std::optional<HttpRefusal> r = FrameBody(head, &length)) {
      Answer(c, *r);
      return;
    }
    if (length > limits.max_body_bytes) {
      Answer(c, Refuse(413, "RESOURCE_EXHAUSTED",
                       absl::StrCat("request body of ", length,
                                    " bytes (Content-Length) is larger than the HTTP limit of ",
                                    limits.max_body_bytes, " bytes (", options_.body_limit_source,
                                    ")")));
      return;
    }
    if (options_.check_head) {
      if (std::optional<HttpRefusal> r = options_.check_head(head, length)) {
        Answer(c, *r);
        return;
      }
    }
    // The head httplib parses: the same request line and fields, without
    // the framing this guard consumed.
    std::string httplib_head = absl::StrCat(head.method, " ", head.target, " ", head.version, "\r\n");
    bool client_close = head.version == "HTTP/1.0";
    bool expect_continue = false;
    for (const auto& [name, value] : head.headers) {
      if (absl::EqualsIgnoreCase(name, "Content-Length") ||
          absl::EqualsIgnoreCase(name, "Transfer-Encoding")) {
        continue;
      }
      if (absl::EqualsIgnoreCase(name, "Expect")) {
        expect_continue = absl::EqualsIgnoreCase(value, "100-continue");
        continue;
      }
      if (absl::EqualsIgnoreCase(name, "Connection")) {
        const std::string lower = absl::AsciiStrToLower(value);
        if (absl::StrContains(lower, "close")) client_close = true;
        if (absl::StrContains(lower, "keep-alive")) client_close = false;
      }
      absl::StrAppend(&httplib_head, name, ": ", value, "\r\n");
    }
    absl::StrAppend(&httplib_head, "Content-Length: 0\r\n\r\n");
    c.buffer.erase(0, head_end);
    HttpExchange exchange;
    exchange.fd = c.transport->fd();
    if (length != 0) {
      if (expect_continue && c.buffer.empty()) {
        static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
        if (!c.transport->Write(kContinue, sizeof(kContinue) - 1,
                                std::chrono::milliseconds(limits.write_timeout_ms))) {
          return;
        }
      }
      if (std::optional<HttpRefusal> r = ReadBody(c, length, &exchange.body)) {
        Answer(c, *r);
        return;
      }
    }
    HeadStream stream(httplib_head, c.transport, std::chrono::milliseconds(limits.write_timeout_ms));
    const bool close = client_close || draining_.load() || served + 1 >= kMaxRequestsPerConnection;
    bool closed = false;
    current_exchange = &exchange;
    const bool ok = process(stream, close, closed);
    current_exchange = nullptr;
    if (!ok || closed || close || stream.failed()) return;
  }
}

void HttpConnectionGuard::Serve(int fd, SSL_CTX* tls, const Process& process) {
  // Closes the socket however this returns (an exception included: an
  // unclosed socket was the GET /v1/%FF fd leak).
  struct Closer {
    int fd;
    ~Closer() {
      ::shutdown(fd, SHUT_RDWR);
      ::close(fd);
    }
  } closer{fd};
  struct Count {
    std::atomic<int>& open;
    int now;
    explicit Count(std::atomic<int>& o) : open(o), now(o.fetch_add(1) + 1) {}
    ~Count() { open.fetch_sub(1); }
  } count(open_);
  const int flags = ::fcntl(fd, F_GETFL, 0);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) return;
  SSL* ssl = nullptr;
  if (tls != nullptr) {
    ssl = SSL_new(tls);
    if (ssl == nullptr) return;
    SSL_set_fd(ssl, fd);
    SSL_set_accept_state(ssl);
    SSL_set_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  }
  Transport transport(fd, ssl);
  Connection c{&transport, {}, 0,
               Clock::now() + std::chrono::milliseconds(options_.limits.header_timeout_ms)};
  if (count.now > options_.limits.max_connections) {
    // Over the limit: answered at once (plain HTTP; a TLS client would need
    // a handshake first, it is closed).
    if (tls == nullptr) {
      Answer(c, Refuse(503, "UNAVAILABLE",
                       absl::StrCat("the HTTP port has ", options_.limits.max_connections,
                                    " connections open, its limit (--http-max-connections); "
                                    "retry later")));
    }
    return;
  }
  if (!transport.Handshake(c.head_deadline)) return;
  try {
    Run(c, process);
  } catch (...) {
    // httplib throws from parsing (bad_alloc, a std::regex error): this
    // connection ends, the process does not.
    current_exchange = nullptr;
  }
}

// --------------------------------------------------------------- servers ----

namespace {

class GuardedServer final : public httplib::Server {
 public:
  explicit GuardedServer(std::shared_ptr<HttpConnectionGuard> guard) : guard_(std::move(guard)) {}

 private:
  bool process_and_close_socket(socket_t sock) override {
    guard_->Serve(sock, nullptr, [this](httplib::Stream& strm, bool close, bool& closed) {
      return process_request(strm, close, closed, nullptr);
    });
    return true;
  }
  std::shared_ptr<HttpConnectionGuard> guard_;
};

class GuardedSslServer final : public httplib::SSLServer {
 public:
  GuardedSslServer(std::shared_ptr<HttpConnectionGuard> guard, const std::string& cert,
                   const std::string& key, const std::string& ca)
      : httplib::SSLServer(cert.c_str(), key.c_str(), ca.empty() ? nullptr : ca.c_str()),
        guard_(std::move(guard)) {}

 private:
  bool process_and_close_socket(socket_t sock) override {
    guard_->Serve(sock, ssl_context(), [this](httplib::Stream& strm, bool close, bool& closed) {
      return process_request(strm, close, closed, nullptr);
    });
    return true;
  }
  std::shared_ptr<HttpConnectionGuard> guard_;
};

}  // namespace

void GuardedHttpServer::BeginDrain() {
  if (guard) guard->BeginDrain();
}

GuardedHttpServer NewGuardedHttpServer(const HttpGuardOptions& options,
                                       const std::string& tls_cert, const std::string& tls_key,
                                       const std::string& tls_ca) {
  GuardedHttpServer out;
  out.guard = std::make_shared<HttpConnectionGuard>(options);
  if (tls_cert.empty()) {
    out.server = std::make_unique<GuardedServer>(out.guard);
  } else {
    out.server = std::make_unique<GuardedSslServer>(out.guard, tls_cert, tls_key, tls_ca);
  }
  // The Keep-Alive header httplib writes tells these values.
  out.server->set_keep_alive_timeout(
      std::max<time_t>(1, static_cast<time_t>((options.limits.idle_timeout_ms + 999) / 1000)));
  out.server->set_keep_alive_max_count(kMaxRequestsPerConnection);
  return out;
}

}  // namespace vocabd
