#include "parallel/optimized_plans.h"

#include <map>
#include <mutex>

namespace tessel::parallel {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, OptimizedPlanBuilder> builders;
};

// Built-ins are listed here rather than self-registered from their files: a
// static library drops object files nothing references, and their static
// registrars with them.
Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();
    reg->builders["LlamaForCausalLM"] = llama_optimized_plan;
    reg->builders["MistralForCausalLM"] = mistral_optimized_plan;
    reg->builders["Qwen2ForCausalLM"] = qwen2_optimized_plan;
    reg->builders["Qwen3ForCausalLM"] = qwen3_optimized_plan;
    reg->builders["Gemma3ForCausalLM"] = gemma3_optimized_plan;
    reg->builders["Qwen3MoeForCausalLM"] = qwen3_moe_optimized_plan;
    reg->builders["MixtralForCausalLM"] = mixtral_optimized_plan;
    return reg;
  }();
  return *r;
}

}  // namespace

void register_optimized_plan(const std::string& architecture, OptimizedPlanBuilder builder) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.builders[architecture] = std::move(builder);
}

bool unregister_optimized_plan(const std::string& architecture) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.builders.erase(architecture) != 0;
}

std::optional<OptimizedPlanBuilder> find_optimized_plan(const std::string& architecture) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.builders.find(architecture);
  if (it == r.builders.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> optimized_plan_architectures() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> out;
  for (const auto& [name, b] : r.builders) out.push_back(name);
  return out;
}

}  // namespace tessel::parallel
