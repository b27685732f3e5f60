// libFuzzer target: lib/checkpoint/safetensors.cc ParseSafetensorsHeader on arbitrary
// bytes. Every accepted header must describe tensors inside the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "lib/checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto header = vocabd::ParseSafetensorsHeader(data, size, "fuzz.safetensors");
  if (header.ok()) {
    for (const auto& [name, entry] : header->tensors) {
      if (entry.begin > entry.end || entry.end > size || entry.begin < header->data_start) {
        std::abort();  // the parser accepted an out-of-bounds tensor
      }
      // Touch the bytes so ASan checks they are readable.
      volatile uint8_t sink = 0;
      for (uint64_t i = entry.begin; i < entry.end; i += 4096) sink = static_cast<uint8_t>(sink ^ data[i]);
    }
  }
  return 0;
}
