// libFuzzer target: config.json -> ModelConfig mapping (lib/checkpoint/hf_config.cc).
// An accepted config must pass ModelConfig::Validate.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "lib/checkpoint/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = vocabd::ParseHfConfig(text, "fuzz/config.json");
  if (config.ok()) {
    if (!config->Validate().ok()) std::abort();
    (void)vocabd::HfCanonicalTensorNames(config->architecture);
  }
  return 0;
}
