// EmbeddingService/EmbedStream: a bidirectional stream of EmbedRequest ->
// EmbedResponse, one response per request, in request order.
//
// Each request is admitted (CallTracker limits) and answered exactly like
// Embed: the lookup is cheap and runs inline on the reactor thread, so the
// responses are produced in order and only their writes are queued.
//
// Flow control: at most one write is in progress; answered requests wait in
// a queue, and the next read is started only while that queue holds fewer
// than kMaxBufferedResponses responses and fewer than kMaxBufferedBytes
// bytes. A client that writes but does not read therefore stops being read
// (gRPC's transport window then stops its writes): the server buffers at
// most kMaxBufferedBytes plus one response (<= --max-send-message-bytes)
// per stream.
//
// The first failing request (bad input, unknown model, limit, response too
// large) ends the stream with its status once every earlier response is
// written; the message starts with "requests[i]: " (i = 0-based index in the
// stream). Until then, whatever the client still sends is read and dropped
// unanswered (a client that writes everything before reading would otherwise
// wait on the server while the server waits on it). Client half-close ends the stream with OK once all responses are
// written. Cancellation (client cancel, deadline, server drain past
// --drain-timeout-ms) fails the pending read or write and ends the stream
// with CANCELLED. The reactor never blocks and deletes itself in OnDone.
#ifndef VOCABD_SERVER_EMBED_STREAM_REACTOR_H_
#define VOCABD_SERVER_EMBED_STREAM_REACTOR_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>

#include <grpcpp/grpcpp.h>

#include "vocabd/v1/embedding.grpc.pb.h"

namespace vocabd {

class EmbeddingServiceImpl;

class EmbedStreamReactor
    : public grpc::ServerBidiReactor<v1::EmbedRequest, v1::EmbedResponse> {
 public:
  static constexpr int kMaxBufferedResponses = 16;
  static constexpr int64_t kMaxBufferedBytes = 8 << 20;

  // `service` answers each request (EmbeddingServiceImpl::DoEmbed) and must
  // outlive the call (it does: the server drains calls before destroying it).
  EmbedStreamReactor(EmbeddingServiceImpl* service, grpc::CallbackServerContext* context);

  void OnReadDone(bool ok) override;
  void OnWriteDone(bool ok) override;
  void OnDone() override;

  // Largest number of response bytes any stream of this process held
  // (queued plus the one being written), for tests of the bound above.
  static int64_t PeakBufferedBytes() { return peak_buffered_bytes_.load(); }

 private:
  // With mu_ held: starts the next write, read or Finish as the state allows.
  void Advance();

  EmbeddingServiceImpl* service_;
  grpc::CallbackServerContext* context_;
  v1::EmbedRequest request_;  // the read buffer

  std::mutex mu_;
  std::deque<v1::EmbedResponse> queued_;  // answered, not yet written
  int64_t queued_bytes_ = 0;              // their serialized sizes
  std::optional<v1::EmbedResponse> writing_;  // the write buffer
  int64_t writing_bytes_ = 0;
  int64_t next_seq_ = 0;  // index of the next request read
  bool reading_ = false;
  bool reads_done_ = false;  // client half-closed (or the read failed)
  // Set when a request failed or a write found the client gone: Finish with
  // it once the responses before it are written.
  std::optional<grpc::Status> finish_status_;
  bool finished_ = false;  // Finish called

  static std::atomic<int64_t> peak_buffered_bytes_;
};

}  // namespace vocabd

#endif  // VOCABD_SERVER_EMBED_STREAM_REACTOR_H_
