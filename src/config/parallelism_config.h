// The parallel layout of a run, read from `policy.dtensor_cfg` and
// `cluster` (the reference recipe's keys). This is the typed view the mesh,
// plan and FSDP layers consume; it checks types and spelling (an unknown key
// under dtensor_cfg is an error with a suggestion, since a typo there would
// otherwise silently train with the default layout) and that sizes are
// positive. Cross-field rules (divisibility by the world size, HSDP needs
// `_v2`) belong to the device mesh, which knows the world size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace tessel::config {

// `custom_parallel_plan`: either a reference to a plan elsewhere (a dotted
// import-like path, `file.yaml:name` or `lib.so:symbol`; parsed by the plan
// layer) or a mapping written inline (module pattern -> style).
struct CustomPlanSpec {
  std::string reference;            // empty for an inline plan
  std::optional<Config> inline_plan;  // set for an inline plan
  bool is_inline() const { return inline_plan.has_value(); }
};

struct ParallelismConfig {
  bool v2 = false;  // `_v2`; the reference treats a missing key as false
  int64_t tensor_parallel_size = 1;
  int64_t context_parallel_size = 1;
  int64_t expert_parallel_size = 1;
  int64_t dp_replicate_size = 1;
  bool sequence_parallel = false;
  bool activation_checkpointing = false;
  // Not a reference key. Gradient accumulation over micro batches: false
  // (default) reduce-scatters every micro batch into the sharded gradients
  // (HSDP: the replicate all-reduce on the last one only); true keeps full
  // unsharded gradients on every rank until the last micro batch, trading
  // DDP-sized gradient memory for fewer collectives.
  bool accumulate_unsharded_grads = false;
  // Not a reference key. FSDP's unsharded parameters held once per node in
  // shared memory instead of gathered by every rank (fsdp::FSDPOptions::
  // node_shared_params): CPU runs whose FSDP shard group is one machine.
  bool node_shared_params = false;
  // Not a reference key. HSDP only: each replica keeps the optimizer state of
  // 1/dp_replicate_size of its shards and all-gathers the updated part
  // during the next forward (fsdp::FSDPOptions::shard_optimizer_over_replicas).
  bool shard_optimizer_over_replicas = false;
  std::optional<CustomPlanSpec> custom_parallel_plan;  // null / absent -> none
  int64_t num_nodes = 1;
  int64_t gpus_per_node = 1;  // processes per node on CPU
  // The config file the run was loaded from ("" if built in code): file
  // references in custom_parallel_plan are searched relative to it.
  std::string config_path;

  int64_t world_size() const { return num_nodes * gpus_per_node; }
};

// The keys `policy.dtensor_cfg` accepts; any other is an error. Each one is
// read: it changes the result or a value tessel cannot honour is refused
// (`cpu_offload: true`, `enabled: false`, a non-empty `env_vars`, ...).
const std::vector<std::string>& dtensor_cfg_keys();

// Reads `policy.dtensor_cfg` (optional: all defaults when absent) and
// `cluster` (optional). UsageError naming the key on a wrong type, an
// unknown key or a size below 1.
ParallelismConfig parallelism_from(const Config& config);

}  // namespace tessel::config
