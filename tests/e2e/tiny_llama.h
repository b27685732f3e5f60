// The e2e tests' view of the tiny Llama runner (examples/tiny_llama/
// tiny_llama.h, shared with examples/generate_text.cc) plus run.c-style
// greedy generation with the test-side llama2.c decoder.
#ifndef VOCABD_TESTS_E2E_TINY_LLAMA_H_
#define VOCABD_TESTS_E2E_TINY_LLAMA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "examples/tiny_llama/tiny_llama.h"
#include "tests/e2e/tokenizer.h"

namespace vocabd::testing {

using tiny_llama::LlamaSteps;
using tiny_llama::TinyLlama;

// Greedy generation as llama2.c run.c with an empty prompt and temperature 0:
//   token = BOS (1), for pos in [0, steps): next = Step(token, pos);
//   stop if next == BOS; text += tokenizer.Decode(token, next); token = next.
// Then text += "\n" (run.c prints a final newline). `generated`, if not
// null, receives the generated ids (BOS excluded).
absl::StatusOr<std::string> GenerateGreedy(TinyLlama& model, const Llama2cTokenizer& tokenizer,
                                           int steps, std::vector<int64_t>* generated = nullptr);

}  // namespace vocabd::testing

#endif  // VOCABD_TESTS_E2E_TINY_LLAMA_H_
