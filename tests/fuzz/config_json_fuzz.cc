// libFuzzer target for config.json / generation_config.json parsing: any text gives a config or
// an error naming the file; never a crash or sanitizer report.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto config = sparkserve::model::ParseQwen35Config(text, "fuzz/config.json");
  if (!config.ok() && std::string(config.status().message()).find("fuzz/config.json") == std::string::npos) {
    std::abort();  // errors name the file
  }
  if (config.ok()) {
    (void)config->stop_token_ids();
    (void)config->LayerPattern();
  }
  auto generation = sparkserve::model::ParseGenerationConfig(text, "fuzz/generation_config.json");
  if (!generation.ok() && generation.status().message().empty()) std::abort();
  return 0;
}
