#include "server/score_stream_reactor.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/happens_before.h"
#include "server/call_tracker.h"
#include "server/grpc_status.h"
#include "server/scoring_service.h"

namespace vocabd {

ScoreStreamReactor::ScoreStreamReactor(const ServiceContext& service,
                                       grpc::CallbackServerContext* context)
    : service_(service), context_(context) {
  std::lock_guard<std::mutex> lock(mu_);
  Advance();  // starts the first read
}

void ScoreStreamReactor::OnReadDone(bool ok) {
  CallbackScope scope(this);
  std::unique_lock<std::mutex> lock(mu_);
  reading_ = false;
  if (!ok) {
    reads_done_ = true;
    Advance();
    return;
  }
  const int64_t seq = next_seq_++;
  if (finished_) return;
  auto fail = [&](const absl::Status& status) {
    failed_ = true;
    results_[seq] = Result{absl::Status(status.code(), absl::StrCat("requests[", seq, "]: ",
                                                                    status.message())),
                           {}};
    Advance();
  };
  if (service_.tracker != nullptr) {
    grpc::Status admitted = service_.tracker->Admit(context_, request_);
    if (!admitted.ok()) {
      return fail(absl::Status(static_cast<absl::StatusCode>(admitted.error_code()),
                               admitted.error_message()));
    }
  }
  auto model = service_.registry->Get(request_.model());
  if (!model.ok()) return fail(model.status());
  auto hidden = DecodeHidden(request_.hidden());
  if (!hidden.ok()) return fail(hidden.status());
  auto hidden_rows = std::make_shared<HiddenRows>(std::move(*hidden));
  auto request = std::make_shared<v1::ScoreRequest>(std::move(request_));
  request_.Clear();
  const ScoreInput input = ScoreInputFromProto(*request, *hidden_rows);
  ++in_compute_;
  Advance();  // may start the next read (flow control permitting)
  lock.unlock();
  // `done` may run inline (validation error, queue full) or on a compute
  // thread; Complete takes the lock itself.
  const Model& m = **model;
  m.ScoreAsync(input, ComputeCheck(context_, service_.metrics, m, input.head.rows),
               [this, seq, model = *model, hidden_rows, request](absl::Status status,
                                                                  ScoreOutput output) {
                 v1::ScoreResponse response;
                 if (status.ok()) {
                   ScoreOutputToProto(output, request->target_ids_size() > 0, *model, *request,
                                      &response);
                 }
                 Complete(seq, std::move(status), std::move(response));
               });
}

void ScoreStreamReactor::Complete(int64_t seq, absl::Status status,
                                  v1::ScoreResponse response) {
  bool del = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    --in_compute_;
    if (!status.ok()) {
      failed_ = true;
      status = absl::Status(status.code(),
                            absl::StrCat("requests[", seq, "]: ", status.message()));
    }
    results_[seq] = Result{std::move(status), std::move(response)};
    Advance();
    del = ShouldDelete();
  }
  if (del) delete this;
}

void ScoreStreamReactor::OnWriteDone(bool ok) {
  CallbackScope scope(this);
  std::lock_guard<std::mutex> lock(mu_);
  writing_.reset();
  ++next_write_;
  if (!ok && !finished_) {
    // The client went away; nothing more can be sent.
    finished_ = true;
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "stream write failed (client gone)"));
    return;
  }
  Advance();
}

void ScoreStreamReactor::Advance() {
  if (finished_) return;
  if (!writing_.has_value()) {
    auto it = results_.find(next_write_);
    if (it != results_.end()) {
      if (!it->second.status.ok()) {
        finished_ = true;
        Finish(ToGrpcStatus(it->second.status));
        results_.clear();
        return;
      }
      writing_ = std::move(it->second.response);
      results_.erase(it);
      StartWrite(&*writing_);
    }
  }
  const int64_t outstanding = next_seq_ - next_write_;
  if (!reads_done_ && !reading_ && !failed_ && outstanding < kMaxInFlight) {
    reading_ = true;
    StartRead(&request_);
  }
  if ((reads_done_ || failed_) && !reading_ && !writing_.has_value() &&
      next_write_ == next_seq_) {
    finished_ = true;
    Finish(grpc::Status::OK);
  }
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
