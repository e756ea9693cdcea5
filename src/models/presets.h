// Built-in model presets: tiny random models of each family for tests and
// examples (byte-level vocab 256, hidden 64, a few hundred thousand
// parameters), and "llama-100m" (~100M parameters) for benchmarks. A preset
// is a config.json text; create_preset_model() builds it and initialises it
// deterministically from a seed (init_weights).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/causal_lm.h"

namespace tessel::models {

// "tiny-llama", "tiny-mistral", "tiny-qwen2", "tiny-qwen3", "tiny-gemma3",
// "tiny-qwen3-moe", "tiny-mixtral", "llama-100m".
std::vector<std::string> preset_names();
// The preset's config.json text. Throws tessel::UsageError listing the known
// presets for an unknown name.
std::string make_preset_config(const std::string& name);
std::shared_ptr<CausalLM> create_preset_model(const std::string& name, uint64_t seed,
                                              const BuildOptions& options = {});

}  // namespace tessel::models
