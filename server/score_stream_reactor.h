// ScoringService/ScoreStream: a bidirectional stream of ScoreRequest ->
// ScoreResponse, one response per request, in request order.
//
// Each request is decoded and validated on the reactor thread and scored
// asynchronously exactly like Score (through the model's dynamic batcher, so
// the requests of one stream - and of other callers - share GEMMs).
//
// Flow control (no blocking): the next read is started only while fewer
// than kMaxInFlight requests are unanswered (in compute or answered, not
// yet written) and the stream holds fewer than kMaxBufferedBytes: the
// memory estimate of each request in compute (HeadRequestMemory, the
// --max-request-memory-bytes formula) plus the encoded size of each answer
// waiting to be written. A client that writes but never reads therefore
// stops being read (gRPC's transport window then stops its writes): a stream
// holds at most kMaxBufferedBytes plus one request's estimate (<=
// --max-request-memory-bytes) plus the answer being written, and all of it is
// freed when the stream ends (cancel, deadline, drain). The first failing request (bad input, unknown model, queue
// full, ...) ends the stream with its status after every earlier response
// has been written and the stream's requests still in compute are back
// (dropped unrun when cancelled); the message starts with "requests[i]: "
// (i = 0-based index in the stream). Until then, later requests are read and
// dropped unscored (a client that writes everything before reading would
// otherwise wait on the server while it waits on the client). Client half-close ends the stream with OK once all
// responses are written. Cancelled streams drop their queued requests before
// compute. The reactor never blocks; it deletes itself when gRPC is done
// with it and no compute callback can still reach it.
#ifndef VOCABD_SERVER_SCORE_STREAM_REACTOR_H_
#define VOCABD_SERVER_SCORE_STREAM_REACTOR_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "server/service_context.h"
#include "vocabd/v1/scoring.grpc.pb.h"

namespace vocabd {

class ScoreStreamReactor : public grpc::ServerBidiReactor<v1::ScoreRequest, v1::ScoreResponse> {
 public:
  static constexpr int kMaxInFlight = 64;
  static constexpr int64_t kMaxBufferedBytes = 16 << 20;
  // Most bytes any stream held at once (held_bytes_ below) since the last
  // reset, for tests.
  static int64_t peak_buffered_bytes() { return peak_buffered_bytes_.load(); }
  static void reset_peak_buffered_bytes() { peak_buffered_bytes_.store(0); }

  ScoreStreamReactor(const ServiceContext& service, grpc::CallbackServerContext* context);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

 private:
  struct Result {
    absl::Status status;
    v1::ScoreResponse response;
    int64_t bytes = 0;  // response.ByteSizeLong()
  };
  // Called (any thread) when request `seq` (estimated `estimate` bytes) has
  // its result.
  void Complete(int64_t seq, int64_t estimate, absl::Status status, v1::ScoreResponse response);
  // With mu_ held: starts the next write, read or Finish as the state allows.
  void Advance();
  // With mu_ held: clears results_ (and their bytes from held_bytes_).
  void DropResults();
  // With mu_ held: deletes this when gRPC and every callback are done.
  bool ShouldDelete() const;

  ServiceContext service_;
  grpc::CallbackServerContext* context_;
  v1::ScoreRequest request_;  // the read buffer

  std::mutex mu_;
  std::map<int64_t, Result> results_;  // finished, not yet written
  std::optional<v1::ScoreResponse> writing_;  // the write buffer
  int64_t next_seq_ = 0;      // sequence number of the next request read
  int64_t next_write_ = 0;    // sequence number of the next response to write
  int in_compute_ = 0;        // requests submitted whose result is not in yet
  // Estimates of the requests in compute + bytes of results_ + writing_.
  int64_t held_bytes_ = 0;
  int64_t writing_bytes_ = 0;
  static std::atomic<int64_t> peak_buffered_bytes_;
  bool reading_ = false;
  bool reads_done_ = false;   // client half-closed (or the read failed)
  bool failed_ = false;       // a request failed: read no more
  // Set when the stream is to end with an error (a request failed, or a
  // write found the client gone); Finish(*finish_status_) is called once
  // in_compute_ is 0.
  std::optional<grpc::Status> finish_status_;
  bool finished_ = false;     // Finish called
  bool done_ = false;         // OnDone called
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_SCORE_STREAM_REACTOR_H_
