// A custom plan written as a Python module (examples/custom_parallel/
// custom_parallel.py), read as data by config/python_data.h with the imports a
// plan file may make. (Mapping the values onto style objects needs libtorch,
// which this clang build cannot compile; the parser is what reads untrusted
// text.)
#include "config/python_data.h"
#include "fuzz_input.h"
#include "parallel/plan_file_imports.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tessel::fuzz::expect_only_tessel_errors([&] {
    const auto module = tessel::config::parse_python_data(text, "plan.py", tessel::parallel::plan_file_imports());
    for (const auto& name : module.names()) (void)module.find(name)->value.describe();
  });
  return 0;
}
