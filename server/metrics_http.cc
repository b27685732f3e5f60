#include "server/metrics_http.h"

#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace vocabd {
namespace {

// httplib task queue running each connection on its own thread: a thread is
// started when a connection arrives and no started thread is free (up to
// `max_threads`; beyond it connections wait in FIFO order); a thread left
// without work for kIdleExit ends. An idle keep-alive connection therefore
// holds only its own thread, never the one a scrape needs.
class ConnectionThreads final : public httplib::TaskQueue {
 public:
  explicit ConnectionThreads(size_t max_threads) : max_threads_(max_threads) {}
  ~ConnectionThreads() override { shutdown(); }

  void enqueue(std::function<void()> fn) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = workers_.begin(); it != workers_.end();) {  // reap ended threads
      if (it->done) {
        it->thread.join();
        it = workers_.erase(it);
      } else {
        ++it;
      }
    }
    jobs_.push_back(std::move(fn));
    // Every waiting thread takes one job; start one more if they are too few.
    if (jobs_.size() > waiting_ && workers_.size() < max_threads_) {
      Worker& worker = workers_.emplace_back();
      try {
        worker.thread = std::thread([this, &worker] { Work(&worker); });
      } catch (const std::system_error&) {
        // No thread to be had (process or memory limits): the job waits for
        // a started thread; never throw into httplib's accept loop.
        workers_.pop_back();
        cv_.notify_one();
      }
    } else {
      cv_.notify_one();
    }
  }

  // Runs the jobs already queued, then joins every thread.
  void shutdown() override {
    std::list<Worker> workers;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      workers.swap(workers_);  // list nodes (the threads' Worker*) stay put
    }
    cv_.notify_all();
    for (Worker& worker : workers) worker.thread.join();
  }

 private:
  static constexpr std::chrono::seconds kIdleExit{10};
  struct Worker {
    std::thread thread;
    bool done = false;  // Work() returned (or is returning): join it
  };

  void Work(Worker* self) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      ++waiting_;
      cv_.wait_for(lock, kIdleExit, [this] { return !jobs_.empty() || stopping_; });
      --waiting_;
      if (jobs_.empty()) {  // stopping, or idle for kIdleExit
        self->done = true;
        return;
      }
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      try {
        job();  // serves one connection, then closes its socket
      } catch (...) {
        // httplib catches handler exceptions, not parsing ones (bad_alloc):
        // losing one connection must not end the process.
      }
      lock.lock();
    }
  }

  const size_t max_threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  size_t waiting_ = 0;  // threads blocked in cv_.wait_for
  bool stopping_ = false;
  std::list<Worker> workers_;
};

}  // namespace

httplib::TaskQueue* NewConnectionThreads(size_t max_threads) {
  return new ConnectionThreads(max_threads);
}

absl::Status SplitHostPort(const std::string& address, const std::string& flag,
                           std::string* host, int* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " = '", address, "' must be host:port (for example 0.0.0.0:9090)"));
  }
  std::string h = address.substr(0, colon);
  if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
  int p = 0;
  if (!absl::SimpleAtoi(address.substr(colon + 1), &p) || p < 0 || p > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " = '", address, "': port '",
                                                   address.substr(colon + 1),
                                                   "' must be a number in [0, 65535]"));
  }
  *host = h;
  *port = p;
  return absl::OkStatus();
}

absl::Status MetricsHttpServer::Options::Validate() const {
  std::string host;
  int port = 0;
  return SplitHostPort(listen_address, "--metrics-listen", &host, &port);
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Create(
    const Options& options, const Metrics* metrics) {
  std::string host;
  int port = 0;
  if (absl::Status s = SplitHostPort(options.listen_address, "--metrics-listen", &host, &port);
      !s.ok()) {
    return s;
  }
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->http_ = std::make_unique<httplib::Server>();
  httplib::Server& http = *server->http_;
  http.new_task_queue = [] { return new ConnectionThreads(kMaxConnectionThreads); };
  // Remembers the listening socket (the last one created is the one bound).
  int listen_socket = -1;
  http.set_socket_options([&listen_socket](socket_t sock) {
    httplib::default_socket_options(sock);
    listen_socket = sock;
  });
  http.Get("/metrics", [metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics->Render(), "text/plain; version=0.0.4; charset=utf-8");
  });
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  if (port == 0) {
    server->port_ = http.bind_to_any_port(host);
  } else {
    server->port_ = http.bind_to_port(host, port) ? port : -1;
  }
  if (server->port_ <= 0) {
    return absl::UnavailableError(absl::StrCat("--metrics-listen = '", options.listen_address,
                                               "': cannot bind (address in use or invalid)"));
  }
  // The library listens with a backlog of 5 (CPPHTTPLIB_LISTEN_BACKLOG, fixed
  // when Debian built it): a burst of connections overflows it and the
  // kernel drops SYNs, each costing the client a 1 s retransmit (64 quick
  // connects took 8 s). listen() again on the listening socket raises it.
  if (listen_socket >= 0) ::listen(listen_socket, SOMAXCONN);
  http.set_socket_options(httplib::default_socket_options);  // drop the local's reference
  server->thread_ = std::thread([s = server.get()] { s->http_->listen_after_bind(); });
  return server;
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
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
