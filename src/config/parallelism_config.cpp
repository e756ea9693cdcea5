#include "config/parallelism_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "config/suggest.h"
#include "core/error.h"

namespace tessel::config {

namespace {

const std::vector<std::string>& known_dtensor_keys() {
  static const std::vector<std::string> keys = {
      "_v2", "enabled", "tensor_parallel_size", "context_parallel_size", "expert_parallel_size",
      "dp_replicate_size", "sequence_parallel", "activation_checkpointing", "cpu_offload",
      "custom_parallel_plan", "accumulate_unsharded_grads",
      // Accepted so that reference recipes load; they have no effect here.
      "env_vars", "automodel_kwargs", "lora_cfg"};
  return keys;
}

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

}  // namespace

ParallelismConfig parallelism_from(const Config& config) {
  ParallelismConfig out;
  out.config_path = config.source_path();

  const std::string d = "policy.dtensor_cfg";
  if (const Config* section = config.find(d); section && !section->is_null()) {
    if (!section->is_map()) throw_type_error(d, "a mapping", *section);
    check_known(*section, d, known_dtensor_keys());
    out.v2 = flag(*section, d, "_v2", out.v2);
    out.enabled = flag(*section, d, "enabled", out.enabled);
    out.tensor_parallel_size = positive(*section, d, "tensor_parallel_size", 1);
    out.context_parallel_size = positive(*section, d, "context_parallel_size", 1);
    out.expert_parallel_size = positive(*section, d, "expert_parallel_size", 1);
    out.dp_replicate_size = positive(*section, d, "dp_replicate_size", 1);
    out.sequence_parallel = flag(*section, d, "sequence_parallel", false);
    out.activation_checkpointing = flag(*section, d, "activation_checkpointing", false);
    out.cpu_offload = flag(*section, d, "cpu_offload", false);
    out.accumulate_unsharded_grads = flag(*section, d, "accumulate_unsharded_grads", false);
    if (const Config* lora = section->find("lora_cfg.enabled");
        lora && Decoder<bool>::decode(*lora, d + ".lora_cfg.enabled")) {
      throw UsageError(d + ".lora_cfg.enabled: LoRA is not supported by tessel; set it to false "
                           "or delete lora_cfg");
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
