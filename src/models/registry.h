// Which builder makes which architecture: config.json's architectures[0]
// ("LlamaForCausalLM", ...) -> the family builder (families.h). An unknown
// architecture fails with the list of supported ones.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/causal_lm.h"
#include "models/model_config.h"

namespace tessel::models {

using ModelBuilder = std::shared_ptr<CausalLM> (*)(const ModelConfig&, const BuildOptions&);

std::vector<std::string> known_architectures();
// Throws tessel::UsageError naming the architecture and the known ones.
ModelBuilder find_builder(const std::string& architecture);

// Builds the model for config.architecture (parameters uninitialised; see
// init_weights() in models/init.h, or load_pretrained()).
std::shared_ptr<CausalLM> build_model(const ModelConfig& config, const BuildOptions& options = {});

}  // namespace tessel::models
