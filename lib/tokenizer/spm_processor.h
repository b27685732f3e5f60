// Internal to lib/tokenizer: a thin wrapper over Debian's libsentencepiece.
// Its header declares `namespace absl { using std::string_view; }`, which
// clashes with Debian's Abseil (whose absl::string_view is its own class),
// so this header and spm_processor.cc use only the standard library and
// are the one place sentencepiece_processor.h is included.
#ifndef VOCABD_LIB_TOKENIZER_SPM_PROCESSOR_H_
#define VOCABD_LIB_TOKENIZER_SPM_PROCESSOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vocabd {
namespace tokenizer_internal {

class SpmProcessor {
 public:
  // A serialized sentencepiece ModelProto; nullptr and *error on failure.
  static std::unique_ptr<SpmProcessor> Load(std::string_view serialized, std::string* error);
  ~SpmProcessor();

  // Thread-safe (libsentencepiece's Encode is const). offsets: [begin,
  // end) byte offsets into `text`, one per id; nullptr to skip them.
  bool Encode(std::string_view text, std::vector<int32_t>* ids,
              std::vector<std::pair<int64_t, int64_t>>* offsets, int64_t base,
              std::string* error) const;

  int size() const;
  std::string piece(int id) const;
  float score(int id) const;
  // 1 NORMAL 2 UNKNOWN 3 CONTROL 5 UNUSED 6 BYTE (4 USER_DEFINED shows as
  // NORMAL: the library does not expose it).
  int type(int id) const;
  int bos_id() const;
  int eos_id() const;
  int unk_id() const;

 private:
  struct Impl;
  explicit SpmProcessor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tokenizer_internal
}  // namespace vocabd

#endif  // VOCABD_LIB_TOKENIZER_SPM_PROCESSOR_H_
