// Helpers of the multi-rank memory tests (shard_loading_test.cpp,
// memory_contract_test.cpp): a small Llama whose parameters dominate, the
// layouts measured at 4 ranks, and measuring a piece of code with the
// counting allocator (core/counting_allocator.h).
#pragma once

#include <ATen/ATen.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/counting_allocator.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "train/layout_parity.h"

namespace tessel::train::testing {

// Small temporaries besides the measured tensors (scalars, index tensors).
inline constexpr int64_t kSlackBytes = 32 * 1024;

// A Llama config.json of real structure, untied; by default 6 layers of
// hidden 128 and a vocab of 2048, so the embedding and head are the largest
// parameters (as in real models). 4 query heads over 2 KV heads: tp 2 splits both.
inline std::string llama_config_json(int layers = 6, int hidden = 128, int intermediate = 384, int vocab = 2048) {
  nlohmann::json j = {{"architectures", {"LlamaForCausalLM"}},
                      {"model_type", "llama"},
                      {"vocab_size", vocab},
                      {"hidden_size", hidden},
                      {"intermediate_size", intermediate},
                      {"num_hidden_layers", layers},
                      {"num_attention_heads", 4},
                      {"num_key_value_heads", 2},
                      {"max_position_embeddings", 256},
                      {"rms_norm_eps", 1e-6},
                      {"hidden_act", "silu"},
                      {"rope_theta", 10000.0},
                      {"tie_word_embeddings", false},
                      {"torch_dtype", "float32"}};
  return j.dump();
}

struct Layout {
  const char* name;
  int tp;
  int replicate;
};
inline const Layout kLayouts[] = {{"FSDP 4", 1, 1}, {"TP 2 x FSDP 2", 2, 1}, {"HSDP 2x2", 1, 2}};

inline dist::DeviceMesh mesh_for(const Layout& l) {
  dist::MeshSizes sizes;
  sizes.world_size = dist::world()->size();
  sizes.tp = l.tp;
  sizes.dp_replicate = l.replicate;
  return dist::DeviceMesh(dist::MeshLayout(sizes), dist::world());
}

// fp32 bytes of a tensor of `shape`.
inline int64_t bytes_of(const std::vector<int64_t>& shape) {
  int64_t n = 4;
  for (int64_t d : shape) n *= d;
  return n;
}

// What running f costs, by the allocator: the peak above what was live
// before, and what stays live after (e.g. the shards it made).
struct Measured {
  int64_t peak_growth = 0;
  int64_t retained = 0;
};

template <typename F>
Measured measure(F&& f) {
  const int64_t before = CountingCpuAllocator::live_bytes();
  CountingCpuAllocator::reset_peak();
  f();
  return Measured{CountingCpuAllocator::peak_bytes() - before, CountingCpuAllocator::live_bytes() - before};
}

}  // namespace tessel::train::testing
