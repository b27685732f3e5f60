// libFuzzer target for the RPC surface: arbitrary bytes are parsed as one
// RPC's request message and sent through the real handlers (validation ->
// lib -> status mapping) of an in-process VocabdServer, over an in-process
// channel (no sockets; same interceptors and handlers as the network path).
//
// Input layout:
//   byte 0      RPC selector (kRpcs[byte % size])
//   bytes 1..   the request message in protobuf wire format (inputs that do
//               not parse are skipped)
//
// Crashes it reports, besides ASan/UBSan findings:
//   * an exception left a handler (gRPC answers UNIMPLEMENTED with an empty
//     message, or UNKNOWN),
//   * a call took longer than the call deadline (DEADLINE_EXCEEDED): 5 s,
//     or VOCABD_FUZZ_CALL_DEADLINE_MS (for long runs on a machine that is
//     busy with other work, where a legitimate 18 MB answer took over 5 s),
//   * the server's VmRSS grew by more than kMaxRssGrowthMb over one input.
// run_fuzz.sh also passes -malloc_limit_mb (one allocation above the server's
// --max-request-memory-bytes budget x 2 is a crash: the budget missed it),
// -rss_limit_mb and -timeout per input.
//
// Seeds: VOCABD_REQUEST_SEEDS_OUT=<dir> writes the seed corpus (the requests
// the server tests send, including the request-bound regressions of
// tests/server/request_bounds_test.cc) and exits.
//
// Memory across inputs: gRPC 1.51's in-process transport never frees a
// bidi-streaming call (client and server side, ~20 KB) whose callback
// reactor Finishes before it has read the client's half-close (here: an
// EmbedStream/ScoreStream whose first request is refused). vocabd's reactors
// are done and deleted (OnDone runs for every stream); the same calls over
// TCP free everything, and a plain echo reactor that Finishes early leaks the
// same way, so it is the transport, not vocabd. The in-process channel stays:
// its sends complete only when the peer reads, which is how this fuzzer
// found the stream deadlock a TCP channel hides behind its flow-control
// window. run_fuzz.sh therefore restarts the fuzzer every
// VOCABD_FUZZ_RUNS_PER_PROCESS inputs; one process must not run millions.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

#include "server/server.h"
#include "vocabd/v1/embedding.grpc.pb.h"
#include "vocabd/v1/model.grpc.pb.h"
#include "vocabd/v1/position.grpc.pb.h"
#include "vocabd/v1/scoring.grpc.pb.h"
#include "vocabd/v1/tokenizer.grpc.pb.h"

#ifndef VOCABD_FUZZ_MODEL
#error "VOCABD_FUZZ_MODEL (path of stories260K.bin) must be defined"
#endif

namespace {

using namespace vocabd;  // NOLINT

// Set once in LLVMFuzzerInitialize.
std::chrono::milliseconds call_deadline(5000);
constexpr int64_t kMaxRssGrowthMb = 512;
// The server's budget for this run (run_fuzz.sh sets -malloc_limit_mb to
// twice this).
constexpr int64_t kBudgetBytes = int64_t{64} << 20;

enum Rpc : uint8_t {
  kListModels, kGetModel, kLoadModel, kUnloadModel, kEmbed, kEmbedStream, kComputeLogits,
  kScore, kScoreStream, kApplyRope, kGetRopeCache, kGetSinusoidalPositions, kGetAlibiSlopes,
  kTokenize, kDetokenize, kGetVocabulary,
  kNumRpcs
};

struct Fuzz {
  std::unique_ptr<VocabdServer> server;
  std::unique_ptr<v1::ModelService::Stub> models;
  std::unique_ptr<v1::EmbeddingService::Stub> embedding;
  std::unique_ptr<v1::ScoringService::Stub> scoring;
  std::unique_ptr<v1::PositionService::Stub> positions;
  std::unique_ptr<v1::TokenizerService::Stub> tokenizer;
};
Fuzz* g = nullptr;

int64_t VmRssMb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6) / 1024;
  }
  return 0;
}

// An exception that escaped a handler (gRPC's callback API answers
// UNIMPLEMENTED with no message), or a call that outlived its deadline.
void CheckStatus(const char* rpc, const grpc::Status& status) {
  const bool escaped = (status.error_code() == grpc::StatusCode::UNIMPLEMENTED &&
                        status.error_message().empty()) ||
                       status.error_code() == grpc::StatusCode::UNKNOWN;
  const bool slow = status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
  if (escaped || slow) {
    std::fprintf(stderr, "request_fuzzer: %s answered %d '%s' (%s)\n", rpc,
                 static_cast<int>(status.error_code()), status.error_message().c_str(),
                 escaped ? "exception escaped a handler" : "call exceeded its deadline");
    std::abort();
  }
}

void SetDeadline(grpc::ClientContext* ctx) {
  ctx->set_deadline(std::chrono::system_clock::now() + call_deadline);
}

template <typename Request, typename Response, typename Call>
void Unary(const char* rpc, const uint8_t* data, size_t size, Call call) {
  Request request;
  if (!request.ParseFromArray(data, static_cast<int>(size))) return;
  Response response;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  CheckStatus(rpc, call(&ctx, request, &response));
}

// One stream: the payload is cut into messages at 0xff 0xfe 0xfd markers
// (up to 4), each parsed as a request; all are written, then all answers read.
template <typename Request, typename Response, typename Open>
void Stream(const char* rpc, const uint8_t* data, size_t size, Open open) {
  std::vector<Request> requests;
  size_t begin = 0;
  for (size_t i = 0; i <= size && requests.size() < 4; ++i) {
    const bool cut = i + 3 <= size && data[i] == 0xff && data[i + 1] == 0xfe && data[i + 2] == 0xfd;
    if (i == size || cut) {
      Request r;
      if (!r.ParseFromArray(data + begin, static_cast<int>(i - begin))) return;
      requests.push_back(std::move(r));
      begin = i + 3;
      i += 2;
    }
  }
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  auto stream = open(&ctx);
  for (const Request& r : requests) {
    if (!stream->Write(r)) break;
  }
  stream->WritesDone();
  Response response;
  while (stream->Read(&response)) {
  }
  CheckStatus(rpc, stream->Finish());
}

void RunOne(uint8_t selector, const uint8_t* data, size_t size) {
  switch (static_cast<Rpc>(selector % kNumRpcs)) {
    case kListModels:
      return Unary<v1::ListModelsRequest, v1::ListModelsResponse>(
          "ListModels", data, size, [](auto* c, const auto& q, auto* r) {
            return g->models->ListModels(c, q, r);
          });
    case kGetModel:
      return Unary<v1::GetModelRequest, v1::ModelInfo>(
          "GetModel", data, size,
          [](auto* c, const auto& q, auto* r) { return g->models->GetModel(c, q, r); });
    case kLoadModel:
      return Unary<v1::LoadModelRequest, v1::ModelInfo>(
          "LoadModel", data, size,
          [](auto* c, const auto& q, auto* r) { return g->models->LoadModel(c, q, r); });
    case kUnloadModel:
      return Unary<v1::UnloadModelRequest, v1::UnloadModelResponse>(
          "UnloadModel", data, size,
          [](auto* c, const auto& q, auto* r) { return g->models->UnloadModel(c, q, r); });
    case kEmbed:
      return Unary<v1::EmbedRequest, v1::EmbedResponse>(
          "Embed", data, size,
          [](auto* c, const auto& q, auto* r) { return g->embedding->Embed(c, q, r); });
    case kEmbedStream:
      return Stream<v1::EmbedRequest, v1::EmbedResponse>(
          "EmbedStream", data, size, [](auto* c) { return g->embedding->EmbedStream(c); });
    case kComputeLogits:
      return Unary<v1::ComputeLogitsRequest, v1::ComputeLogitsResponse>(
          "ComputeLogits", data, size,
          [](auto* c, const auto& q, auto* r) { return g->scoring->ComputeLogits(c, q, r); });
    case kScore:
      return Unary<v1::ScoreRequest, v1::ScoreResponse>(
          "Score", data, size,
          [](auto* c, const auto& q, auto* r) { return g->scoring->Score(c, q, r); });
    case kScoreStream:
      return Stream<v1::ScoreRequest, v1::ScoreResponse>(
          "ScoreStream", data, size, [](auto* c) { return g->scoring->ScoreStream(c); });
    case kApplyRope:
      return Unary<v1::ApplyRopeRequest, v1::ApplyRopeResponse>(
          "ApplyRope", data, size,
          [](auto* c, const auto& q, auto* r) { return g->positions->ApplyRope(c, q, r); });
    case kGetRopeCache:
      return Unary<v1::GetRopeCacheRequest, v1::GetRopeCacheResponse>(
          "GetRopeCache", data, size,
          [](auto* c, const auto& q, auto* r) { return g->positions->GetRopeCache(c, q, r); });
    case kGetSinusoidalPositions:
      return Unary<v1::GetSinusoidalPositionsRequest, v1::GetSinusoidalPositionsResponse>(
          "GetSinusoidalPositions", data, size, [](auto* c, const auto& q, auto* r) {
            return g->positions->GetSinusoidalPositions(c, q, r);
          });
    case kGetAlibiSlopes:
      return Unary<v1::GetAlibiSlopesRequest, v1::GetAlibiSlopesResponse>(
          "GetAlibiSlopes", data, size,
          [](auto* c, const auto& q, auto* r) { return g->positions->GetAlibiSlopes(c, q, r); });
    case kTokenize:
      return Unary<v1::TokenizeRequest, v1::TokenizeResponse>(
          "Tokenize", data, size,
          [](auto* c, const auto& q, auto* r) { return g->tokenizer->Tokenize(c, q, r); });
    case kDetokenize:
      return Unary<v1::DetokenizeRequest, v1::DetokenizeResponse>(
          "Detokenize", data, size,
          [](auto* c, const auto& q, auto* r) { return g->tokenizer->Detokenize(c, q, r); });
    case kGetVocabulary:
      return Unary<v1::GetVocabularyRequest, v1::GetVocabularyResponse>(
          "GetVocabulary", data, size,
          [](auto* c, const auto& q, auto* r) { return g->tokenizer->GetVocabulary(c, q, r); });
    case kNumRpcs:
      return;
  }
}

// ---- seeds: the requests the server tests send ---------------------------

void SetTensor(v1::Tensor* t, v1::DType dtype, std::vector<int64_t> shape, size_t elements,
               float value = 0.25f) {
  t->set_dtype(dtype);
  for (int64_t d : shape) t->add_shape(d);
  const size_t width = dtype == v1::F32 ? 4 : (dtype == v1::I64 ? 8 : (dtype == v1::I32 ? 4 : 2));
  std::string bytes(elements * width, '\0');
  if (dtype == v1::F32) {
    for (size_t i = 0; i < elements; ++i) {
      const float v = value * static_cast<float>(i % 7) - 0.5f;
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
  }
  t->set_data(bytes);
}

void WriteSeed(const std::string& dir, const std::string& name, Rpc rpc,
               const google::protobuf::Message& m) {
  std::string bytes(1, static_cast<char>(rpc));
  bytes += m.SerializeAsString();
  std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
}

void WriteSeeds(const std::string& dir) {
  WriteSeed(dir, "list_models", kListModels, v1::ListModelsRequest());
  v1::GetModelRequest get;
  get.set_name("stories260K");
  WriteSeed(dir, "get_model", kGetModel, get);
  v1::LoadModelRequest load;
  load.set_name("m");
  WriteSeed(dir, "load_model", kLoadModel, load);
  v1::UnloadModelRequest unload;
  unload.set_name("m");
  WriteSeed(dir, "unload_model", kUnloadModel, unload);

  v1::EmbedRequest embed;
  auto* seq = embed.add_sequences();
  for (int id : {1, 2, 3, 511}) seq->add_token_ids(id);
  auto* seq2 = embed.add_sequences();
  seq2->add_token_ids(7);
  seq2->set_position_offset(3);
  WriteSeed(dir, "embed", kEmbed, embed);
  embed.set_output_dtype(v1::BF16);
  embed.set_absolute_positions(v1::ABSOLUTE_POSITIONS_SINUSOIDAL);
  WriteSeed(dir, "embed_bf16_sinusoidal", kEmbed, embed);
  WriteSeed(dir, "embed_stream", kEmbedStream, embed);
  {
    // A stream whose second request fails while the first answer is unsent,
    // then a third request. The in-process transport's writes wait for the
    // peer's read, so a server that stopped reading after the failure would
    // leave both sides waiting until the deadline; the stream reactors read
    // and drop until the answers are out.
    std::string stream(1, static_cast<char>(kEmbedStream));
    v1::EmbedRequest bad;
    bad.add_sequences()->add_token_ids(18300671);
    const std::string marker("\xff\xfe\xfd", 3);
    stream += v1::EmbedRequest().SerializeAsString() + marker + bad.SerializeAsString() +
              marker + bad.SerializeAsString();
    std::ofstream(dir + "/embed_stream_error_before_unsent_answer", std::ios::binary) << stream;
  }

  v1::ComputeLogitsRequest logits;
  SetTensor(logits.mutable_hidden(), v1::F32, {2, 64}, 128);
  WriteSeed(dir, "compute_logits", kComputeLogits, logits);
  logits.set_log_softmax(true);
  logits.set_output_dtype(v1::F16);
  logits.set_temperature(0.7f);
  logits.set_vocab_limit(500);
  WriteSeed(dir, "compute_logits_f16_logsoftmax", kComputeLogits, logits);
  v1::ComputeLogitsRequest nan_logits;
  SetTensor(nan_logits.mutable_hidden(), v1::F32, {1, 64}, 64, std::nanf(""));
  WriteSeed(dir, "compute_logits_nan", kComputeLogits, nan_logits);

  v1::ScoreRequest score;
  SetTensor(score.mutable_hidden(), v1::F32, {3, 64}, 192);
  for (int t : {5, 6, 7}) score.add_target_ids(t);
  score.set_top_k(4);
  WriteSeed(dir, "score", kScore, score);
  std::string stream_seed = score.SerializeAsString() + "\xff\xfe\xfd" + score.SerializeAsString();
  std::ofstream(dir + "/score_stream", std::ios::binary)
      << std::string(1, static_cast<char>(kScoreStream)) + stream_seed;
  // More rows than --max-queue-rows (declared only).
  v1::ScoreRequest many;
  SetTensor(many.mutable_hidden(), v1::F32, {4097, 64}, 0);
  WriteSeed(dir, "score_4097_rows_declared", kScore, many);

  v1::ApplyRopeRequest rope;
  SetTensor(rope.mutable_q(), v1::F32, {1, 8, 4, 8}, 256);
  SetTensor(rope.mutable_k(), v1::F32, {1, 4, 4, 8}, 128);
  rope.add_position_offsets(2);
  WriteSeed(dir, "apply_rope", kApplyRope, rope);
  rope.set_layout(v1::BSHD);
  rope.mutable_q()->clear_shape();
  for (int64_t d : {1, 4, 8, 8}) rope.mutable_q()->add_shape(d);
  rope.mutable_k()->clear_shape();
  for (int64_t d : {1, 4, 4, 8}) rope.mutable_k()->add_shape(d);
  rope.mutable_rope()->set_pair_layout(v1::HALF_SPLIT);
  rope.mutable_rope()->set_theta(10000);
  rope.mutable_rope()->set_head_dim(8);
  rope.mutable_rope()->mutable_scaling()->set_type(v1::ROPE_SCALING_YARN);
  rope.mutable_rope()->mutable_scaling()->set_factor(4);
  WriteSeed(dir, "apply_rope_bshd_yarn", kApplyRope, rope);
  // A zero-sized axis with a huge batch x seq.
  for (int64_t n : {int64_t{32768}, int64_t{1048576}}) {
    v1::ApplyRopeRequest zero;
    SetTensor(zero.mutable_q(), v1::F32, {n, 0, n, 8}, 0);
    SetTensor(zero.mutable_k(), v1::F32, {n, 0, n, 8}, 0);
    WriteSeed(dir, "apply_rope_zero_axis_" + std::to_string(n), kApplyRope, zero);
  }
  v1::ApplyRopeRequest thd;
  thd.set_layout(v1::THD);
  SetTensor(thd.mutable_q(), v1::F32, {5, 8, 8}, 320);
  SetTensor(thd.mutable_k(), v1::F32, {5, 4, 8}, 160);
  thd.add_sequence_lengths(2);
  thd.add_sequence_lengths(3);
  thd.add_position_offsets(0);
  thd.add_position_offsets(10);
  WriteSeed(dir, "apply_rope_thd", kApplyRope, thd);

  v1::GetRopeCacheRequest cache;
  cache.set_num_positions(16);
  cache.set_start_position(3);
  WriteSeed(dir, "get_rope_cache", kGetRopeCache, cache);
  v1::GetSinusoidalPositionsRequest sin;
  sin.set_num_positions(8);
  sin.set_dim(16);
  WriteSeed(dir, "get_sinusoidal", kGetSinusoidalPositions, sin);
  // Its first crash (crash-870a795a): 0 positions, dim 11922309118 -> 47.6 GB.
  v1::GetSinusoidalPositionsRequest huge_dim;
  huge_dim.set_dim(11922309118);
  WriteSeed(dir, "get_sinusoidal_huge_dim", kGetSinusoidalPositions, huge_dim);
  v1::GetAlibiSlopesRequest alibi;
  alibi.set_num_heads(8);
  alibi.set_include_bias(true);
  alibi.set_q_len(4);
  alibi.set_k_len(4);
  WriteSeed(dir, "get_alibi", kGetAlibiSlopes, alibi);

  // The model's tokenizer (tok512.bin beside stories260K.bin).
  v1::TokenizeRequest tokenize;
  tokenize.add_texts("Once upon a time \xF0\x9F\x98\x80 Lily saw a \xE2\x96\x81 cat.");
  tokenize.add_texts("<s> </s> \xC3\xA9\xC3");
  tokenize.set_return_pieces(true);
  tokenize.set_return_offsets(true);
  WriteSeed(dir, "tokenize", kTokenize, tokenize);
  v1::DetokenizeRequest detokenize;
  auto* d = detokenize.add_sequences();
  for (int id : {1, 403, 407, 261, 378, 243, 162}) d->add_ids(id);
  detokenize.set_skip_special_tokens(true);
  WriteSeed(dir, "detokenize", kDetokenize, detokenize);
  d->clear_ids();
  for (int id : {155, 131}) d->add_ids(id);
  for (int id : {403, 243, 162}) d->add_previous_ids(id);
  detokenize.set_incremental(true);
  WriteSeed(dir, "detokenize_incremental", kDetokenize, detokenize);
  v1::ScoreRequest pieces = score;
  pieces.set_return_pieces(true);
  for (int id : {261, 378, 511}) pieces.add_candidate_ids(id);
  WriteSeed(dir, "score_pieces_candidates", kScore, pieces);
  v1::GetVocabularyRequest vocab;
  vocab.set_start_id(500);
  vocab.set_page_size(20);
  WriteSeed(dir, "get_vocabulary", kGetVocabulary, vocab);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  if (const char* out = std::getenv("VOCABD_REQUEST_SEEDS_OUT")) {
    WriteSeeds(out);
    std::exit(0);
  }
  if (const char* ms = std::getenv("VOCABD_FUZZ_CALL_DEADLINE_MS")) {
    call_deadline = std::chrono::milliseconds(std::max(1L, std::atol(ms)));
  }
  spdlog::set_level(spdlog::level::off);
  // Parsing arbitrary bytes logs every invalid UTF-8 string field; silence
  // protobuf's log (it costs more than the call).
  google::protobuf::SetLogHandler(nullptr);
  VocabdServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.models.push_back({"stories260K", VOCABD_FUZZ_MODEL});
  options.compute_threads = 1;
  options.max_request_memory_bytes = kBudgetBytes;
  options.max_send_message_bytes = 32 << 20;
  options.drain_timeout = std::chrono::milliseconds(0);
  auto server = VocabdServer::Create(options);
  if (!server.ok()) {
    std::fprintf(stderr, "request_fuzzer: %s\n", server.status().ToString().c_str());
    std::abort();
  }
  g = new Fuzz;
  g->server = std::move(*server);
  auto channel = g->server->InProcessChannel();
  g->models = v1::ModelService::NewStub(channel);
  g->embedding = v1::EmbeddingService::NewStub(channel);
  g->scoring = v1::ScoringService::NewStub(channel);
  g->positions = v1::PositionService::NewStub(channel);
  g->tokenizer = v1::TokenizerService::NewStub(channel);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int64_t rss_before = VmRssMb();
  RunOne(data[0], data + 1, size - 1);
  const int64_t growth = VmRssMb() - rss_before;
  if (growth > kMaxRssGrowthMb) {
    std::fprintf(stderr, "request_fuzzer: VmRSS grew by %lld MiB on one input (> %lld)\n",
                 static_cast<long long>(growth), static_cast<long long>(kMaxRssGrowthMb));
    std::abort();
  }
  return 0;
}
