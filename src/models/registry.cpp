#include "models/registry.h"

#include <array>

#include "core/error.h"
#include "models/families.h"

namespace tessel::models {

namespace {

struct Entry {
  const char* architecture;
  const char* model_type;  // HF model_type, filled in when a config omits it
  ModelBuilder build;
};

// An explicit table rather than self-registering statics: static libraries
// drop object files nothing references, and with them their registrations.
constexpr std::array<Entry, 7> kEntries{{
    {"LlamaForCausalLM", "llama", &build_llama},
    {"MistralForCausalLM", "mistral", &build_mistral},
    {"Qwen2ForCausalLM", "qwen2", &build_qwen2},
    {"Qwen3ForCausalLM", "qwen3", &build_qwen3},
    {"Gemma3ForCausalLM", "gemma3_text", &build_gemma3},
    {"Qwen3MoeForCausalLM", "qwen3_moe", &build_qwen3_moe},
    {"MixtralForCausalLM", "mixtral", &build_mixtral},
}};

const Entry& find_entry(const std::string& architecture) {
  for (const auto& e : kEntries) {
    if (architecture == e.architecture) return e;
  }
  std::string known;
  for (const auto& e : kEntries) known += (known.empty() ? "" : ", ") + std::string(e.architecture);
  throw UsageError(fmt::format("unknown model architecture '{}' (config.json architectures[0]); "
                               "tessel supports: {}",
                               architecture, known));
}

}  // namespace

std::vector<std::string> known_architectures() {
  std::vector<std::string> names;
  for (const auto& e : kEntries) names.emplace_back(e.architecture);
  return names;
}

ModelBuilder find_builder(const std::string& architecture) { return find_entry(architecture).build; }

std::shared_ptr<CausalLM> build_model(const ModelConfig& config, const BuildOptions& options) {
  const Entry& e = find_entry(config.architecture);
  if (!config.model_type.empty()) return e.build(config, options);
  ModelConfig c = config;  // family rules (e.g. Mistral's window) key on model_type
  c.model_type = e.model_type;
  return e.build(c, options);
}

}  // namespace tessel::models
