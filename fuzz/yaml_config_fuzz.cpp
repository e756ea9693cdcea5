// A run's YAML config and its command-line overrides, through the loader's
// stages: parse, overrides, interpolation, printing back. The input is the
// YAML text, then optionally a NUL byte and one override per line.
#include <sstream>
#include <string>
#include <vector>

#include "config/interpolation.h"
#include "config/loader.h"
#include "config/overrides.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string yaml = input.substr(0, nul);
  std::vector<std::string> overrides;
  if (nul != std::string::npos) {
    std::istringstream lines(input.substr(nul + 1));
    for (std::string line; std::getline(lines, line);) overrides.push_back(line);
  }
  tessel::fuzz::expect_only_tessel_errors([&] {
    tessel::config::Config config = tessel::config::parse_yaml(yaml, "fuzz.yaml");
    tessel::config::apply_overrides(config, overrides);
    tessel::config::resolve_interpolations(config);
    (void)tessel::config::parse_yaml(config.to_yaml(), "fuzz.yaml printed back");
  });
  return 0;
}
