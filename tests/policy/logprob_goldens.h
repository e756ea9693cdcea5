// The golden log-probs of tests/golden/<case>/logprobs.json (written by
// tests/golden/generate_logprobs.py from Hugging Face transformers in
// float64) and the sharded model of a case on a given mesh, as a run builds
// it from the base recipe with policy.model_name set to the case directory.
#pragma once

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "config/loader.h"
#include "config/parallelism_config.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "support/source_tree.h"
#include "train/model_setup.h"
#include "train/train_options.h"

namespace tessel::policy::testing {

// Every model case of tests/golden: each supported family, dense and MoE.
inline const std::vector<std::string>& golden_cases() {
  static const std::vector<std::string> cases = {
      "llama",  "llama3_rope_scaling", "llama_tied", "mistral",          "qwen2",   "qwen3",
      "gemma3", "gemma3_softcap",      "qwen3_moe",  "qwen3_moe_sparse_step", "mixtral", "mixtral_window"};
  return cases;
}

using test_support::golden_dir;

struct LogprobGolden {
  at::Tensor input_ids;      // [B, S] int64, right-padded
  at::Tensor input_lengths;  // [B] int64
  std::vector<double> temperatures;
  std::vector<at::Tensor> logprobs;  // per temperature, [B, S] float64
};

inline LogprobGolden load_logprob_golden(const std::string& name) {
  std::ifstream in(golden_dir(name) / "logprobs.json");
  const nlohmann::json j = nlohmann::json::parse(in);
  LogprobGolden g;
  const auto ids = j.at("input_ids").get<std::vector<std::vector<int64_t>>>();
  g.input_ids = at::empty({static_cast<int64_t>(ids.size()), static_cast<int64_t>(ids[0].size())}, at::kLong);
  for (size_t b = 0; b < ids.size(); ++b) g.input_ids[static_cast<int64_t>(b)].copy_(at::tensor(ids[b], at::kLong));
  g.input_lengths = at::tensor(j.at("input_lengths").get<std::vector<int64_t>>(), at::kLong);
  g.temperatures = j.at("temperatures").get<std::vector<double>>();
  for (const auto& table : j.at("logprobs")) {
    const auto rows = table.get<std::vector<std::vector<double>>>();
    at::Tensor t = at::empty(g.input_ids.sizes(), at::kDouble);
    for (size_t b = 0; b < rows.size(); ++b) t[static_cast<int64_t>(b)].copy_(at::tensor(rows[b], at::kDouble));
    g.logprobs.push_back(t);
  }
  return g;
}

// The mesh of a single-process run (world 1).
inline dist::DeviceMesh one_process_mesh() {
  dist::MeshSizes sizes;
  sizes.world_size = 1;
  return dist::DeviceMesh(dist::MeshLayout(sizes), dist::world());
}

// The base recipe with `overrides` (later ones win).
inline config::Config recipe(const std::vector<std::string>& overrides) {
  return config::load_config(test_support::source_tree() / "examples" / "configs" / "sft.yaml", overrides);
}

// The case's model laid out over `mesh` as the config's dtensor_cfg says.
inline train::ShardedModel golden_model(const std::string& name, const dist::DeviceMesh& mesh,
                                        std::vector<std::string> overrides = {}) {
  overrides.insert(overrides.begin(), "policy.model_name='" + golden_dir(name).string() + "'");
  const config::Config c = recipe(overrides);
  return train::setup_model(train::train_options_from(c), mesh, config::parallelism_from(c));
}

}  // namespace tessel::policy::testing
