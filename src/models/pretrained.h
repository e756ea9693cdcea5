// Hugging Face model directories in and out: config.json plus
// model.safetensors (or a sharded model.safetensors.index.json), read and
// written through the io layer. Tensor names are the HF ones; a tied
// lm_head.weight is not stored (as transformers' save_pretrained does) and is
// ignored when a checkpoint carries it anyway.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/hf_checkpoint.h"
#include "models/causal_lm.h"

namespace tessel::models {

// Builds the model from dir/config.json and loads every parameter from the
// checkpoint, converting to options.dtype. Throws tessel::Error naming the
// tensor when one is missing, when its shape differs from what config.json
// implies (expected and found shapes), or when the checkpoint holds tensors
// the model does not have.
std::shared_ptr<CausalLM> load_pretrained(const std::filesystem::path& dir,
                                          const BuildOptions& options = {});

// Copies the checkpoint's tensors into an already built model (same checks).
void load_weights(CausalLM& model, const std::filesystem::path& dir);

// The checks of load_weights without reading data: `ckpt` must hold each
// tensor of `expected` (name -> full shape, as config.json implies) and
// nothing else but tied aliases and derived buffers. `model` names the
// architecture and the tied aliases in messages. tessel::Error naming the
// tensor (missing, shape differs) or the extra tensors.
void check_checkpoint_tensors(const io::HfCheckpoint& ckpt,
                              const std::vector<std::pair<std::string, std::vector<int64_t>>>& expected,
                              const CausalLM& model);

// The tensors to save, by HF name, each stored tensor once, on the CPU.
std::vector<std::pair<std::string, at::Tensor>> hf_state_dict(const CausalLM& model);

// Writes config.json and the weights into dir (created if missing); shards
// when the weights exceed max_shard_bytes (transformers' default 5 GB).
void save_pretrained(const CausalLM& model, const std::filesystem::path& dir,
                     uint64_t max_shard_bytes = 5'000'000'000);

// Writes config.json and the seeded random initialisation (models/init.h) of
// the model `config` describes into dir, in `dtype`, drawing and writing one
// parameter at a time: the model is never built, so one larger than memory
// can be written. The values equal init_weights(model, seed) of the built
// model. Returns the number of parameters.
int64_t save_initialized(const ModelConfig& config, uint64_t seed, at::ScalarType dtype,
                         const std::filesystem::path& dir, uint64_t max_shard_bytes = 5'000'000'000);

}  // namespace tessel::models
