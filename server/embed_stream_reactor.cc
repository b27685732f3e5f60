#include "server/embed_stream_reactor.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/core/happens_before.h"
#include "server/call_tracker.h"
#include "server/embedding_service.h"
#include "server/grpc_status.h"
#include "server/handler_guard.h"

namespace vocabd {

std::atomic<int64_t> EmbedStreamReactor::peak_buffered_bytes_{0};

EmbedStreamReactor::EmbedStreamReactor(EmbeddingServiceImpl* service,
                                       grpc::CallbackServerContext* context)
    : service_(service), context_(context) {
  std::lock_guard<std::mutex> lock(mu_);
  Advance();  // starts the first read
}

void EmbedStreamReactor::OnReadDone(bool ok) {
  CallbackScope scope(this);
  HappensAfter(&request_);  // deserialized on a gRPC thread
  std::lock_guard<std::mutex> lock(mu_);
  reading_ = false;
  if (!ok) {
    // Half-close, or the call was cancelled (client cancel, deadline, drain).
    reads_done_ = true;
    if (context_->IsCancelled() && !finish_status_.has_value()) {
      finish_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "stream cancelled");
      queued_.clear();
      queued_bytes_ = 0;
    }
    Advance();
    return;
  }
  if (finish_status_.has_value()) {
    request_.Clear();  // read after the stream failed: dropped unanswered
    Advance();
    return;
  }
  const int64_t seq = next_seq_++;
  absl::Status status = absl::OkStatus();
  if (service_->context_.tracker != nullptr) {
    grpc::Status admitted = service_->context_.tracker->Admit(context_, request_);
    if (!admitted.ok()) {
      status = absl::Status(static_cast<absl::StatusCode>(admitted.error_code()),
                            admitted.error_message());
    }
  }
  v1::EmbedResponse response;
  if (status.ok()) {
    // No exception leaves the reactor (server/handler_guard.h).
    status = CatchAll("EmbedStream", nullptr,
                      [&] { return service_->DoEmbed(request_, &response); });
  }
  request_.Clear();
  if (!status.ok()) {
    finish_status_ = ToGrpcStatus(
        absl::Status(status.code(), absl::StrCat("requests[", seq, "]: ", status.message())));
  } else {
    queued_bytes_ += static_cast<int64_t>(response.ByteSizeLong());
    queued_.push_back(std::move(response));
  }
  Advance();
}

void EmbedStreamReactor::OnWriteDone(bool ok) {
  CallbackScope scope(this);
  std::lock_guard<std::mutex> lock(mu_);
  writing_.reset();
  writing_bytes_ = 0;
  if (!ok && !finish_status_.has_value()) {
    // The client went away (or the call was cancelled): nothing more can be sent.
    finish_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "stream write failed (client gone)");
    queued_.clear();
    queued_bytes_ = 0;
  }
  Advance();
}

void EmbedStreamReactor::Advance() {
  if (finished_) return;
  if (!writing_.has_value() && !queued_.empty()) {
    writing_bytes_ = static_cast<int64_t>(queued_.front().ByteSizeLong());
    queued_bytes_ -= writing_bytes_;
    writing_ = std::move(queued_.front());
    queued_.pop_front();
    StartWrite(&*writing_);
  }
  const int64_t held = queued_bytes_ + writing_bytes_;
  int64_t peak = peak_buffered_bytes_.load(std::memory_order_relaxed);
  while (held > peak && !peak_buffered_bytes_.compare_exchange_weak(peak, held)) {
  }
  const bool drained = !writing_.has_value() && queued_.empty();
  if (finish_status_.has_value()) {
    // Earlier responses are written first; a pending read is left to fail
    // when the call ends (gRPC allows Finish with a read outstanding).
    if (drained) {
      finished_ = true;
      Finish(*finish_status_);
    } else if (!reads_done_ && !reading_) {
      // Until they are written, keep reading (and dropping) what the client
      // sends: a client that writes all its requests before reading any
      // answer would otherwise wait on us while we wait on it (flow control
      // both ways; embed_stream_test's ClientWritingEverythingFirst...).
      reading_ = true;
      StartRead(&request_);
    }
    return;
  }
  if (!reads_done_ && !reading_ && static_cast<int>(queued_.size()) < kMaxBufferedResponses &&
      queued_bytes_ < kMaxBufferedBytes) {
    reading_ = true;
    StartRead(&request_);
  }
  if (reads_done_ && !reading_ && drained) {
    finished_ = true;
    Finish(grpc::Status::OK);
  }
}

void EmbedStreamReactor::OnDone() {
  HappensAfter(this);
  delete this;
}

}  // namespace vocabd
