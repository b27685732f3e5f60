// null_server: the transport baseline for vocabd's end-to-end benchmark.
//
// Serves the same gRPC API as vocabd (callback API, same message types) but
// computes nothing: Embed answers [tokens, --hidden] zero bytes in the
// requested dtype, ComputeLogits [rows, --vocab], Score one RowScore per
// hidden row (with top_k entries), ApplyRope echoes q and k. GetModel /
// ListModels describe a model of --vocab x --hidden so `vocabctl bench` can
// shape payloads. Responses therefore carry exactly the bytes vocabd's would,
// and the requests/s it sustains is the ceiling for a service over this
// transport on this machine.
//
//   null_server --listen 127.0.0.1:50761 --vocab 1024 --hidden 4096
#include <pthread.h>

#include <csignal>
#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>

#include "vocabd/v1/embedding.grpc.pb.h"
#include "vocabd/v1/model.grpc.pb.h"
#include "vocabd/v1/position.grpc.pb.h"
#include "vocabd/v1/scoring.grpc.pb.h"

namespace vocabd {
namespace {

struct NullOptions {
  std::string listen = "127.0.0.1:50761";
  std::string model = "null";
  int64_t vocab = 1024;
  int64_t hidden = 4096;
  int heads = 32;
  int kv_heads = 8;
};

size_t DTypeBytes(v1::DType d) { return d == v1::F16 || d == v1::BF16 ? 2 : 4; }
v1::DType OrF32(v1::DType d) { return d == v1::DTYPE_UNSPECIFIED ? v1::F32 : d; }

class NullModels final : public v1::ModelService::CallbackService {
 public:
  explicit NullModels(const NullOptions& o) {
    info_.set_name(o.model);
    info_.set_state(v1::READY);
    info_.set_architecture("null");
    info_.set_vocab_size(o.vocab);
    info_.set_hidden_size(o.hidden);
    info_.set_num_attention_heads(o.heads);
    info_.set_num_key_value_heads(o.kv_heads);
    info_.set_head_dim(static_cast<int32_t>(o.hidden / o.heads));
    info_.set_dtype(v1::F32);
    info_.set_tie_word_embeddings(true);
    info_.set_position_scheme(v1::POSITION_ROPE);
    info_.set_is_default(true);
  }
  grpc::ServerUnaryReactor* GetModel(grpc::CallbackServerContext* ctx, const v1::GetModelRequest*,
                                     v1::ModelInfo* response) override {
    *response = info_;
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* ctx, const v1::ListModelsRequest*,
                                       v1::ListModelsResponse* response) override {
    *response->add_models() = info_;
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }

 private:
  v1::ModelInfo info_;
};

class NullEmbedding final : public v1::EmbeddingService::CallbackService {
 public:
  explicit NullEmbedding(const NullOptions& o) : o_(o) {}
  grpc::ServerUnaryReactor* Embed(grpc::CallbackServerContext* ctx, const v1::EmbedRequest* request,
                                  v1::EmbedResponse* response) override {
    int64_t tokens = 0;
    response->add_sequence_offsets(0);
    for (const auto& s : request->sequences()) {
      tokens += s.token_ids_size();
      response->add_sequence_offsets(tokens);
    }
    const v1::DType dtype = OrF32(request->output_dtype());
    v1::Tensor* t = response->mutable_embeddings();
    t->set_dtype(dtype);
    t->add_shape(tokens);
    t->add_shape(o_.hidden);
    t->mutable_data()->resize(static_cast<size_t>(tokens * o_.hidden) * DTypeBytes(dtype));
    response->set_model(o_.model);
    response->set_request_id(request->request_id());
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }

 private:
  NullOptions o_;
};

class NullScoring final : public v1::ScoringService::CallbackService {
 public:
  explicit NullScoring(const NullOptions& o) : o_(o) {}
  grpc::ServerUnaryReactor* ComputeLogits(grpc::CallbackServerContext* ctx,
                                          const v1::ComputeLogitsRequest* request,
                                          v1::ComputeLogitsResponse* response) override {
    const int64_t rows = request->hidden().shape_size() > 0 ? request->hidden().shape(0) : 0;
    const v1::DType dtype = OrF32(request->output_dtype());
    v1::Tensor* t = response->mutable_logits();
    t->set_dtype(dtype);
    t->add_shape(rows);
    t->add_shape(o_.vocab);
    t->mutable_data()->resize(static_cast<size_t>(rows * o_.vocab) * DTypeBytes(dtype));
    response->set_model(o_.model);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
  grpc::ServerUnaryReactor* Score(grpc::CallbackServerContext* ctx, const v1::ScoreRequest* request,
                                  v1::ScoreResponse* response) override {
    const int64_t rows = request->hidden().shape_size() > 0 ? request->hidden().shape(0) : 0;
    const bool targets = request->target_ids_size() > 0;
    for (int64_t i = 0; i < rows; ++i) {
      v1::RowScore* row = response->add_rows();
      row->set_logsumexp(-1.0f);
      if (targets) {
        row->set_target_logprob(-1.0f);
        row->set_target_rank(1);
      }
      for (int k = 0; k < request->top_k(); ++k) {
        v1::TokenLogprob* t = row->add_top_k();
        t->set_token_id(k + 1);
        t->set_logprob(-1.0f);
      }
    }
    if (targets) {
      response->set_sum_target_logprob(-static_cast<double>(rows));
      response->set_num_targets(rows);
    }
    response->set_model(o_.model);
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }

 private:
  NullOptions o_;
};

class NullPosition final : public v1::PositionService::CallbackService {
 public:
  grpc::ServerUnaryReactor* ApplyRope(grpc::CallbackServerContext* ctx, const v1::ApplyRopeRequest* request,
                                      v1::ApplyRopeResponse* response) override {
    *response->mutable_q() = request->q();
    *response->mutable_k() = request->k();
    auto* r = ctx->DefaultReactor();
    r->Finish(grpc::Status::OK);
    return r;
  }
};

int Main(int argc, char** argv) {
  CLI::App app{"null_server: vocabd's API answered without computing (benchmark baseline)"};
  NullOptions o;
  app.add_option("--listen", o.listen, "host:port")->capture_default_str();
  app.add_option("--model", o.model, "model name reported")->capture_default_str();
  app.add_option("--vocab", o.vocab, "vocab_size reported and used for logits")->capture_default_str();
  app.add_option("--hidden", o.hidden, "hidden_size reported and used for embeddings")->capture_default_str();
  app.add_option("--heads", o.heads, "attention heads reported")->capture_default_str();
  app.add_option("--kv-heads", o.kv_heads, "kv heads reported")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  // Block SIGTERM/SIGINT before gRPC starts threads; sigwait() below.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);

  NullModels models(o);
  NullEmbedding embedding(o);
  NullScoring scoring(o);
  NullPosition position;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(o.listen, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(64 << 20);
  builder.SetMaxSendMessageSize(256 << 20);
  builder.RegisterService(&models);
  builder.RegisterService(&embedding);
  builder.RegisterService(&scoring);
  builder.RegisterService(&position);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server || port == 0) {
    std::cerr << "null_server: cannot listen on " << o.listen << "\n";
    return 1;
  }
  std::cout << "null_server listening on port " << port << std::endl;
  int sig = 0;
  sigwait(&set, &sig);
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}

}  // namespace
}  // namespace vocabd

int main(int argc, char** argv) { return vocabd::Main(argc, argv); }
