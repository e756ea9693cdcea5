// A YAML file of custom parallel plans, read as `file.yaml:custom_parallel_plan`
// is (the key examples/custom_parallel/custom_parallel.yaml uses): the file,
// then the mapping at that key as a plan.
#include "config/loader.h"
#include "fuzz_input.h"
#include "parallel/plan_mapping.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = tessel::fuzz::write_scratch("plans.yaml", data, size);
  tessel::fuzz::expect_only_tessel_errors([&] {
    const tessel::config::Config root = tessel::config::load_yaml_file(path);
    if (const tessel::config::Config* plan = root.find("custom_parallel_plan")) {
      (void)tessel::parallel::plan_from_mapping(*plan, path.string());
    }
  });
  return 0;
}
