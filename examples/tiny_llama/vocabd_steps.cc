#include "examples/tiny_llama/vocabd_steps.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/tensor_codec.h"

namespace vocabd::tiny_llama {

LlamaSteps VocabdSteps(VocabdClient& client, const std::string& model, const ModelConfig& config,
                       v1::RopePairLayout layout_override) {
  const int64_t hidden = config.hidden_size;
  const int64_t heads = config.num_attention_heads;
  const int64_t kv_heads = config.num_key_value_heads;
  const int64_t head_dim = config.head_dim;
  LlamaSteps steps;
  steps.embed = [&client, model, hidden](int64_t token,
                                         int64_t pos) -> absl::StatusOr<std::vector<float>> {
    v1::EmbedRequest req;
    req.set_model(model);
    v1::TokenSequence* seq = req.add_sequences();
    seq->add_token_ids(token);
    seq->set_position_offset(pos);
    auto resp = client.Embed(req);
    if (!resp.ok()) return resp.status();
    const v1::Tensor& t = resp->embeddings();
    if (t.shape_size() != 2 || t.shape(0) != 1 || t.shape(1) != hidden) {
      return absl::InternalError(absl::StrCat("Embed returned shape rank ", t.shape_size()));
    }
    return DecodeFloatTensor(t, "embeddings");
  };
  steps.rope = [&client, model, heads, kv_heads, head_dim, layout_override](
                   std::vector<float>& q, std::vector<float>& k, int64_t pos) -> absl::Status {
    v1::ApplyRopeRequest req;
    req.set_model(model);
    req.set_layout(v1::BHSD);
    if (layout_override != v1::ROPE_PAIR_LAYOUT_UNSPECIFIED) {
      req.mutable_rope()->set_pair_layout(layout_override);
    }
    *req.mutable_q() = EncodeFloatTensor(q, {1, heads, 1, head_dim});
    *req.mutable_k() = EncodeFloatTensor(k, {1, kv_heads, 1, head_dim});
    req.add_position_offsets(pos);
    auto resp = client.ApplyRope(req);
    if (!resp.ok()) return resp.status();
    auto dims = [](const v1::Tensor& t) {
      return std::vector<int64_t>(t.shape().begin(), t.shape().end());
    };
    if (dims(resp->q()) != dims(req.q()) || dims(resp->k()) != dims(req.k())) {
      return absl::InternalError("ApplyRope changed the q/k shapes");
    }
    auto q_out = DecodeFloatTensor(resp->q(), "q");
    if (!q_out.ok()) return q_out.status();
    auto k_out = DecodeFloatTensor(resp->k(), "k");
    if (!k_out.ok()) return k_out.status();
    q = *std::move(q_out);
    k = *std::move(k_out);
    return absl::OkStatus();
  };
  steps.head = [&client, model, hidden](const std::vector<float>& x) -> absl::StatusOr<int64_t> {
    v1::ScoreRequest req;
    req.set_model(model);
    *req.mutable_hidden() = EncodeFloatTensor(x, {1, hidden});
    req.set_top_k(1);  // final norm: default (on)
    auto resp = client.Score(req);
    if (!resp.ok()) return resp.status();
    if (resp->rows_size() != 1 || resp->rows(0).top_k_size() != 1) {
      return absl::InternalError(absl::StrCat("Score returned ", resp->rows_size(),
                                              " rows for 1 hidden row with top_k 1"));
    }
    return resp->rows(0).top_k(0).token_id();
  };
  return steps;
}

}  // namespace vocabd::tiny_llama
