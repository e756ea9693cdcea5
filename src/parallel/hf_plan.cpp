#include "parallel/hf_plan.h"

#include <algorithm>

#include "config/config.h"
#include "config/loader.h"
#include "core/error.h"

namespace tessel::parallel {

std::optional<std::map<std::string, std::string>> known_hf_base_plan(const std::string& architecture) {
  std::map<std::string, std::string> plan = {
      {"layers.*.self_attn.q_proj", "colwise"}, {"layers.*.self_attn.k_proj", "colwise"},
      {"layers.*.self_attn.v_proj", "colwise"}, {"layers.*.self_attn.o_proj", "rowwise"},
      {"layers.*.mlp.gate_proj", "colwise"},    {"layers.*.mlp.up_proj", "colwise"},
      {"layers.*.mlp.down_proj", "rowwise"}};
  if (architecture == "LlamaForCausalLM" || architecture == "MistralForCausalLM" ||
      architecture == "Qwen2ForCausalLM") {
    return plan;
  }
  if (architecture == "Qwen3ForCausalLM" || architecture == "Gemma3ForCausalLM") {
    // Per-head norms on the local heads: partial gradients.
    plan["layers.*.self_attn.q_norm"] = "replicated_with_grad_allreduce";
    plan["layers.*.self_attn.k_norm"] = "replicated_with_grad_allreduce";
    return plan;
  }
  return std::nullopt;
}

HfPlan hf_plan(const models::ModelConfig& c) {
  HfPlan out;
  std::vector<std::pair<std::string, std::string>> base;
  const config::Config* from_json = nullptr;
  config::Config json;
  if (!c.json_text.empty()) {
    json = config::parse_yaml(c.json_text, c.source.empty() ? "config.json" : c.source);
    from_json = json.find("base_model_tp_plan");
    if (from_json && from_json->is_null()) from_json = nullptr;
  }
  if (from_json) {
    if (!from_json->is_map()) {
      throw UsageError(fmt::format("{}: base_model_tp_plan must be a mapping of module pattern -> style, got {}",
                                   c.source, from_json->to_flow()));
    }
    for (const auto& [k, v] : from_json->entries()) {
      if (v.kind() != config::Kind::String) {
        throw UsageError(fmt::format("{}: base_model_tp_plan['{}'] must be a style string, got {}", c.source, k,
                                     v.to_flow()));
      }
      base.emplace_back(k, v.as_string());
    }
    out.origin = fmt::format("base_model_tp_plan of {}", c.source.empty() ? "config.json" : c.source);
  } else if (auto known = known_hf_base_plan(c.architecture)) {
    for (const auto& [k, v] : *known) base.emplace_back(k, v);
    out.origin = fmt::format("the known HF default for {}", c.architecture);
  } else {
    throw UsageError(fmt::format("no HF tensor-parallel plan for {}: {} has no base_model_tp_plan and the "
                                 "architecture has no known default",
                                 c.architecture.empty() ? "<unknown architecture>" : c.architecture,
                                 c.source.empty() ? "config.json" : c.source));
  }
  bool has_embed = false;
  for (const auto& [k, v] : base) {
    out.plan.add("model." + k, v);
    has_embed = has_embed || k == "embed_tokens";
  }
  if (!has_embed) out.plan.add("model.embed_tokens", "rowwise_rep");
  out.plan.add("lm_head", "colwise_rep");
  return out;
}

}  // namespace tessel::parallel
