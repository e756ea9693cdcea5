// config.json of a Hugging Face model directory.
#include <string>

#include "fuzz_input.h"
#include "models/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tessel::fuzz::expect_only_tessel_errors([&] {
    const auto config = tessel::models::parse_model_config(text, "fuzz/config.json");
    (void)tessel::models::to_config_json(config);
  });
  return 0;
}
