// libFuzzer target: lib/checkpoint/gguf.cc ParseGguf on arbitrary bytes. Every
// accepted tensor must lie inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "lib/checkpoint/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = vocabd::ParseGguf(data, size, "fuzz.gguf");
  if (file.ok()) {
    for (const auto& t : file->tensors) {
      if (t.offset > size || t.nbytes > size - t.offset || t.ne.empty() || t.ne.size() > 4) {
        std::abort();
      }
      volatile uint8_t sink = 0;
      if (t.nbytes > 0) sink = static_cast<uint8_t>(sink ^ data[t.offset + t.nbytes - 1]);
      (void)t.shape();
    }
  }
  return 0;
}
