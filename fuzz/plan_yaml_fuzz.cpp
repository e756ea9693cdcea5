// A YAML file of custom parallel plans, named by a
// `custom_parallel_plan: <file>.yaml:custom_parallel_plan` reference
// (the key examples/custom_parallel/custom_parallel.yaml uses).
#include "config/parallelism_config.h"
#include "fuzz_input.h"
#include "parallel/custom_plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = tessel::fuzz::write_scratch("plans.yaml", data, size);
  tessel::config::CustomPlanSpec spec;
  spec.reference = path.string() + ":custom_parallel_plan";
  tessel::fuzz::expect_only_tessel_errors(
      [&] { (void)tessel::parallel::load_custom_plan(spec, ""); });
  return 0;
}
