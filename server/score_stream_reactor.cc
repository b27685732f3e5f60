#include "server/score_stream_reactor.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/core/happens_before.h"
#include "server/call_tracker.h"
#include "server/grpc_status.h"
#include "server/handler_guard.h"
#include "lib/core/status_macros.h"
#include "server/response_size.h"
#include "server/scoring_service.h"

namespace vocabd {

std::atomic<int64_t> ScoreStreamReactor::peak_buffered_bytes_{0};

ScoreStreamReactor::ScoreStreamReactor(const ServiceContext& service,
                                       grpc::CallbackServerContext* context)
    : service_(service), context_(context) {
  std::lock_guard<std::mutex> lock(mu_);
  Advance();  // starts the first read
}

void ScoreStreamReactor::OnReadDone(bool ok) {
  CallbackScope scope(this);
  HappensAfter(&request_);  // deserialized on a gRPC thread (CallTracker's POST_RECV_MESSAGE)
  std::unique_lock<std::mutex> lock(mu_);
  reading_ = false;
  if (!ok) {
    reads_done_ = true;
    Advance();
    return;
  }
  if (finished_ || failed_) {
    // Read after an earlier request failed: the stream ends with that
    // failure, so this one is dropped unscored.
    request_.Clear();
    Advance();
    return;
  }
  const int64_t seq = next_seq_++;
  auto fail = [&](const absl::Status& status) {
    failed_ = true;
    results_[seq] = Result{
        absl::Status(status.code(), absl::StrCat("requests[", seq, "]: ", status.message())), {}};
    Advance();
  };
  if (service_.tracker != nullptr) {
    grpc::Status admitted = service_.tracker->Admit(context_, request_);
    if (!admitted.ok()) {
      return fail(absl::Status(static_cast<absl::StatusCode>(admitted.error_code()),
                               admitted.error_message()));
    }
  }
  absl::StatusOr<HeadCall> call;
  std::shared_ptr<v1::ScoreRequest> request;
  ScoreInput input;
  absl::Status prepared = CatchAll("ScoreStream", nullptr, [&]() -> absl::Status {
    call = PrepareHeadCall(*service_.registry, request_, service_.max_request_memory_bytes);
    if (!call.ok()) return call.status();
    request = std::make_shared<v1::ScoreRequest>(std::move(request_));
    request_.Clear();
    ASSIGN_OR_RETURN(input, ScoreInputFromProto(*request, *call));
    return absl::OkStatus();
  });
  if (!prepared.ok()) return fail(prepared);
  const int64_t estimate = HeadRequestMemory(*request, *call->model).bytes();
  ++in_compute_;
  held_bytes_ += estimate;
  Advance();  // may start the next read (flow control permitting)
  lock.unlock();
  // `done` may run inline (validation error, queue full) or on a compute
  // thread; Complete takes the lock itself.
  const Model& m = *call->model;
  m.ScoreAsync(input, ComputeCheck(context_, service_.metrics, m, input.head.rows),
               [this, seq, estimate, model = call->model, hidden_rows = call->hidden, request](
                   absl::Status status, ScoreOutput output) {
                 v1::ScoreResponse response;
                 status = CatchAll("ScoreStream", nullptr, [&]() -> absl::Status {
                   RETURN_IF_ERROR(status);
                   ScoreOutputToProto(output, request->target_ids_size() > 0, *model, *request,
                                      &response);
                   return CheckResponseSize(response, service_.max_send_message_bytes);
                 });
                 if (!status.ok()) response.Clear();
                 Complete(seq, estimate, std::move(status), std::move(response));
               });
}

void ScoreStreamReactor::Complete(int64_t seq, int64_t estimate, absl::Status status,
                                  v1::ScoreResponse response) {
  const int64_t bytes = status.ok() ? static_cast<int64_t>(response.ByteSizeLong()) : 0;
  bool del = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --in_compute_;
    held_bytes_ -= estimate;
    if (!status.ok()) {
      failed_ = true;
      status = absl::Status(status.code(), absl::StrCat("requests[", seq, "]: ", status.message()));
    }
    if (!finish_status_.has_value()) {
      held_bytes_ += bytes;
      results_[seq] = Result{std::move(status), std::move(response), bytes};
    }
    Advance();
    del = ShouldDelete();
  }
  if (del) delete this;
}

void ScoreStreamReactor::OnWriteDone(bool ok) {
  CallbackScope scope(this);
  std::lock_guard<std::mutex> lock(mu_);
  writing_.reset();
  held_bytes_ -= writing_bytes_;
  writing_bytes_ = 0;
  ++next_write_;
  if (!ok && !finished_ && !finish_status_.has_value()) {
    // The client went away; nothing more can be sent. Advance finishes once
    // the requests still in compute are back.
    failed_ = true;
    finish_status_ = grpc::Status(grpc::StatusCode::CANCELLED, "stream write failed (client gone)");
    DropResults();
  }
  Advance();
}

void ScoreStreamReactor::Advance() {
  if (finished_) return;
  if (!writing_.has_value() && !finish_status_.has_value()) {
    auto it = results_.find(next_write_);
    if (it != results_.end()) {
      if (!it->second.status.ok()) {
        finish_status_ = ToGrpcStatus(it->second.status);
        DropResults();
      } else {
        writing_ = std::move(it->second.response);
        writing_bytes_ = it->second.bytes;
        results_.erase(it);
        StartWrite(&*writing_);
      }
    }
  }
  if (finish_status_.has_value()) {
    // Finish only when no request of this stream is queued or computing:
    // their cancellation checks read context_, which gRPC frees once the
    // finished call is done (OnDone).
    if (in_compute_ == 0 && !writing_.has_value()) {
      finished_ = true;
      Finish(*finish_status_);
    } else if (!reads_done_ && !reading_) {
      reading_ = true;  // read and dropped meanwhile (see below)
      StartRead(&request_);
    }
    return;
  }
  // After a failure the earlier answers are still written first; meanwhile
  // what the client sends is read and dropped, so a client that writes all
  // its requests before reading any answer does not wait on us while we wait
  // on it (flow control both ways; scoring_serving_test's
  // ScoreStreamClientWritingEverythingFirst...).
  const int64_t outstanding = next_seq_ - next_write_;
  int64_t peak = peak_buffered_bytes_.load(std::memory_order_relaxed);
  while (held_bytes_ > peak && !peak_buffered_bytes_.compare_exchange_weak(peak, held_bytes_)) {
  }
  if (!reads_done_ && !reading_ &&
      (failed_ || (outstanding < kMaxInFlight && held_bytes_ < kMaxBufferedBytes))) {
    reading_ = true;
    StartRead(&request_);
  }
  if ((reads_done_ || failed_) && !reading_ && !writing_.has_value() && next_write_ == next_seq_) {
    finished_ = true;
    Finish(grpc::Status::OK);
  }
}

void ScoreStreamReactor::DropResults() {
  for (const auto& [seq, result] : results_) held_bytes_ -= result.bytes;
  results_.clear();
}

bool ScoreStreamReactor::ShouldDelete() const { return done_ && in_compute_ == 0; }

void ScoreStreamReactor::OnDone() {
  HappensAfter(this);
  bool del = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    del = ShouldDelete();
  }
  if (del) delete this;
}

}  // namespace vocabd
