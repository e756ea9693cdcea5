// Saving a model as a Hugging Face directory that transformers (and
// HfCheckpoint) load: config.json plus either one model.safetensors or, when
// the tensors exceed max_shard_bytes, shards model-00001-of-0000N.safetensors
// and model.safetensors.index.json ({"metadata": {"total_size": bytes},
// "weight_map": {name: shard}}), the layout save_pretrained writes.
//
// Shared or tied tensors (e.g. lm_head.weight tied to
// model.embed_tokens.weight) are stored once: the caller passes each name
// once, and passing the same name twice is an error. Each file is written
// atomically; after the new files are in place, files of an earlier save in a
// different layout (a stale index, stale shards, a stale single file) are
// removed so they cannot shadow the new one. Export into a fresh directory
// when a crash must leave no mix of old and new shards.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "io/safetensors_writer.h"

namespace tessel::io {

// transformers' default max_shard_size ("5GB").
inline constexpr uint64_t kDefaultMaxShardBytes = 5'000'000'000;

// Writes `tensors` into `dir` (created if missing). Shards are filled in the
// given order; a new shard starts when the next tensor would push the current
// one past max_shard_bytes (a tensor larger than that gets a shard of its
// own). `config_json` is written verbatim as config.json after checking it is
// a JSON object; pass "" to write no config.json. Each safetensors file gets
// metadata {"format": "pt"}, which transformers checks for.
// With a `produce`, `tensors` only describe the data and each tensor is made
// at write time (io::TensorProducer), so a model larger than memory can be written.
void save_hf_checkpoint(const std::filesystem::path& dir, const NamedTensors& tensors,
                        const std::string& config_json,
                        uint64_t max_shard_bytes = kDefaultMaxShardBytes,
                        const TensorProducer& produce = {});

}  // namespace tessel::io
