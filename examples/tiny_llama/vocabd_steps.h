// The three vocabd-owned steps of the tiny Llama (tiny_llama.h) as vocabd
// gRPC calls: Embed (token -> input row), ApplyRope (q/k of one position,
// BHSD) and Score (last block output -> final norm + LM head -> top-1 id).
#ifndef VOCABD_EXAMPLES_TINY_LLAMA_VOCABD_STEPS_H_
#define VOCABD_EXAMPLES_TINY_LLAMA_VOCABD_STEPS_H_

#include <string>

#include "client/vocabd_client.h"
#include "examples/tiny_llama/tiny_llama.h"
#include "lib/checkpoint/model_config.h"

namespace vocabd::tiny_llama {

// Calls go to `model` on `client` (which must outlive the steps). `config`
// gives hidden_size, head counts and head_dim (copied). When
// `layout_override` is set, ApplyRope asks for that pair layout instead of
// the model's (the e2e tests use it to show a wrong layout breaks the text).
LlamaSteps VocabdSteps(VocabdClient& client, const std::string& model, const ModelConfig& config,
                       v1::RopePairLayout layout_override = v1::ROPE_PAIR_LAYOUT_UNSPECIFIED);

}  // namespace vocabd::tiny_llama

#endif  // VOCABD_EXAMPLES_TINY_LLAMA_VOCABD_STEPS_H_
