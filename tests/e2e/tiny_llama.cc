#include "tests/e2e/tiny_llama.h"

#include "absl/strings/str_cat.h"
#include "lib/core/status_macros.h"

namespace vocabd::testing {

absl::StatusOr<std::string> GenerateGreedy(TinyLlama& model, const Llama2cTokenizer& tokenizer,
                                           int steps, std::vector<int64_t>* generated) {
  model.Reset();
  std::string text;
  int64_t token = Llama2cTokenizer::kBosId;
  for (int pos = 0; pos < steps; ++pos) {
    ASSIGN_OR_RETURN(const int64_t next, model.Step(token, pos));
    if (next < 0 || next >= tokenizer.vocab_size()) {
      return absl::OutOfRangeError(absl::StrCat("step ", pos, " produced token id ", next,
                                                " outside [0, ", tokenizer.vocab_size(), ")"));
    }
    if (next == Llama2cTokenizer::kBosId) break;
    if (generated != nullptr) generated->push_back(next);
    text += tokenizer.Decode(token, next);
    token = next;
  }
  text += "\n";
  return text;
}

}  // namespace vocabd::testing
