#include "config/parallelism_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "config/suggest.h"
#include "core/error.h"

namespace tessel::config {

const std::vector<std::string>& dtensor_cfg_keys() {
  static const std::vector<std::string> keys = {
      "_v2", "enabled", "tensor_parallel_size", "context_parallel_size", "expert_parallel_size",
      "dp_replicate_size", "sequence_parallel", "activation_checkpointing", "cpu_offload",
      "custom_parallel_plan", "accumulate_unsharded_grads", "node_shared_params",
      "shard_optimizer_over_replicas",
      // The reference's; accepted so that its recipes load, refused (below)
      // when set to anything tessel would have to ignore.
      "env_vars", "automodel_kwargs", "lora_cfg"};
  return keys;
}

namespace {

void check_known(const Config& section, const std::string& prefix,
                 const std::vector<std::string>& known) {
  for (const auto& key : section.keys()) {
    if (std::find(known.begin(), known.end(), key) != known.end()) continue;
    throw UsageError(fmt::format("unknown key '{}.{}'.{} Known keys under '{}': {}", prefix, key,
                                 did_you_mean([&] {
                                   auto names = closest_names(known, key);
                                   for (auto& n : names) n = prefix + "." + n;
                                   return names;
                                 }()),
                                 prefix, fmt::join(known, ", ")));
  }
}

int64_t positive(const Config& section, const std::string& prefix, const std::string& key,
                 int64_t fallback) {
  std::string path = prefix + "." + key;
  const Config* node = section.child(key);
  int64_t value = node ? Decoder<int64_t>::decode(*node, path) : fallback;
  if (value < 1) {
    throw UsageError(fmt::format("{} must be a positive integer, got {}", path, value));
  }
  return value;
}

bool flag(const Config& section, const std::string& prefix, const std::string& key, bool fallback) {
  const Config* node = section.child(key);
  return node ? Decoder<bool>::decode(*node, prefix + "." + key) : fallback;
}

// Keys a recipe may carry but tessel cannot honour: they load when they ask
// for nothing (the reference's defaults) and are refused otherwise, so no
// setting is silently ignored.
void refuse_what_would_be_ignored(const Config& section, const std::string& d) {
  // A CPU build keeps every parameter, gradient and optimizer state in host
  // memory already; offloading is a device-build feature.
  if (flag(section, d, "cpu_offload", false)) {
    throw UsageError(d + ".cpu_offload=true: this tessel is a CPU build, so parameters, gradients "
                         "and optimizer state already live in host memory; cpu_offload applies "
                         "to device (GPU) builds only. Set it to false or remove it");
  }
  if (!flag(section, d, "enabled", true)) {
    throw UsageError(d + ".enabled=false selects another training backend in the reference; "
                         "tessel has only the DTensor one (FSDP2, HSDP, TP). Set it to true or "
                         "remove it");
  }
  const auto refuse_unless_empty = [&](const char* key, const char* what_it_does) {
    const Config* node = section.child(key);
    if (node == nullptr || node->is_null() || (node->is_map() && node->size() == 0)) return;
    throw UsageError(fmt::format("{}.{} is not empty, but tessel does not read it ({}); remove it "
                                 "or set it to null",
                                 d, key, what_it_does));
  };
  refuse_unless_empty("env_vars",
                      "the reference sets its workers' environment from it: export the variables "
                      "before starting tessel instead");
  refuse_unless_empty("automodel_kwargs", "the reference passes it to NeMo Automodel");
  if (const Config* lora = section.find("lora_cfg.enabled");
      lora && Decoder<bool>::decode(*lora, d + ".lora_cfg.enabled")) {
    throw UsageError(d + ".lora_cfg.enabled: LoRA is not supported by tessel; set it to false "
                         "or delete lora_cfg");
  }
}

}  // namespace

ParallelismConfig parallelism_from(const Config& config) {
  ParallelismConfig out;
  out.config_path = config.source_path();

  const std::string d = "policy.dtensor_cfg";
  if (const Config* section = config.find(d); section && !section->is_null()) {
    if (!section->is_map()) throw_type_error(d, "a mapping", *section);
    check_known(*section, d, dtensor_cfg_keys());
    refuse_what_would_be_ignored(*section, d);
    out.v2 = flag(*section, d, "_v2", out.v2);
    out.tensor_parallel_size = positive(*section, d, "tensor_parallel_size", 1);
    out.context_parallel_size = positive(*section, d, "context_parallel_size", 1);
    out.expert_parallel_size = positive(*section, d, "expert_parallel_size", 1);
    out.dp_replicate_size = positive(*section, d, "dp_replicate_size", 1);
    out.sequence_parallel = flag(*section, d, "sequence_parallel", false);
    out.activation_checkpointing = flag(*section, d, "activation_checkpointing", false);
    out.accumulate_unsharded_grads = flag(*section, d, "accumulate_unsharded_grads", false);
    out.node_shared_params = flag(*section, d, "node_shared_params", false);
    out.shard_optimizer_over_replicas = flag(*section, d, "shard_optimizer_over_replicas", false);
    if (out.shard_optimizer_over_replicas) {
      // The split divides each FSDP group's shards over the replicas; where
      // a rank holds no such group of replicated shards there is nothing to
      // divide, and the other layouts mix shards the gradient norm counts
      // over other groups (tp, ep): refused rather than silently ignored.
      const auto refuse = [&](const std::string& why) {
        throw UsageError(fmt::format("{}.shard_optimizer_over_replicas=true {}", d, why));
      };
      if (out.dp_replicate_size == 1)
        refuse("needs HSDP: set dp_replicate_size to the number of replicas (> 1), or the key to false");
      if (out.tensor_parallel_size > 1 || out.expert_parallel_size > 1)
        refuse("is built for FSDP x dp_replicate only: set tensor_parallel_size and expert_parallel_size to 1");
      if (out.node_shared_params) refuse("cannot be combined with node_shared_params=true");
    }
    if (const Config* plan = section->child("custom_parallel_plan"); plan && !plan->is_null()) {
      CustomPlanSpec spec;
      if (plan->kind() == Kind::String) {
        if (plan->as_string().empty()) {
          throw UsageError(d + ".custom_parallel_plan is an empty string; use null for no custom "
                               "plan");
        }
        spec.reference = plan->as_string();
      } else if (plan->is_map()) {
        spec.inline_plan = *plan;
      } else {
        throw_type_error(d + ".custom_parallel_plan",
                         "null, a plan reference ('pkg.module.name', 'file.yaml:name', "
                         "'lib.so:symbol') or a mapping of module pattern -> style",
                         *plan);
      }
      out.custom_parallel_plan = std::move(spec);
    }
  }

  const std::string c = "cluster";
  if (const Config* section = config.find(c); section && !section->is_null()) {
    if (!section->is_map()) throw_type_error(c, "a mapping", *section);
    out.num_nodes = positive(*section, c, "num_nodes", 1);
    out.gpus_per_node = positive(*section, c, "gpus_per_node", 1);
  }
  return out;
}

}  // namespace tessel::config
