// Generation from the policy (SPEC 11): batched autoregressive decoding with
// a KV cache (policy/kv_cache.h) on a decoding copy of the weights
// (policy/decoding_model.h), sampling as policy/sampling.h, stopping per row
// at a stop token or after max_new_tokens, and each generated token's
// log-probability (GRPO's generation_logprobs).
//
// One prefill forward runs the prompts' columns (left- or right-padded: each
// row's positions count its real tokens only, so padding on either side
// changes nothing), then one forward per new token runs each row's last
// token. Only the positions sampled from go through lm_head. Rows that have
// stopped ride along until every row of the batch has; their later tokens are
// dropped.
//
// generate_on_mesh() is what GRPO and `tessel generate` call: it refits the
// decoding copy, splits the rows over the decoding layout's row groups,
// decodes them in batches of at most batch_size rows, gathers every row's
// result on every rank and frees the copy and the caches before it returns.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "config/parallelism_config.h"
#include "dist/device_mesh.h"
#include "policy/decoding_model.h"
#include "policy/sampling.h"
#include "train/model_setup.h"

namespace tessel::policy {

enum class Padding { Left, Right };

struct GenerationOptions {
  SamplingOptions sampling;
  int64_t max_new_tokens = 16;
  // A row also stops when prompt and response reach this many tokens (0: no
  // limit; GRPO passes policy.max_total_sequence_length).
  int64_t max_total_length = 0;
  std::vector<int64_t> stop_token_ids;  // a row stops after generating one of these (it is kept)
  int64_t pad_id = 0;                   // fills the output after a row's end
};

struct PromptBatch {
  at::Tensor input_ids;      // [B, S] int64
  at::Tensor input_lengths;  // [B] int64, each in [1, S]
  Padding padding = Padding::Right;
  // Each row's random stream (its index in the whole batch: policy/sampling.h);
  // empty: 0 .. B-1.
  std::vector<int64_t> streams;
};

struct Generation {
  at::Tensor tokens;    // [B, N] int64 new tokens, pad_id after each row's end (N: the longest row's count)
  at::Tensor logprobs;  // [B, N] float32, 0 after each row's end
  at::Tensor lengths;   // [B] int64: tokens generated (a stop token counts)
  at::Tensor stopped;   // [B] bool: ended at a stop token (else at a length limit)
  int64_t kv_cache_bytes = 0;  // the KV cache this rank held (the largest of its batches)
};

// Decodes `prompts` on `decoder` (every rank of its tp group passes the same
// rows). Results on the CPU.
Generation generate(DecodingModel& decoder, const PromptBatch& prompts, const GenerationOptions& options);

// What one generate_on_mesh call cost, the same on every rank.
struct GenerationStats {
  double refit_s = 0.0;           // building and filling the decoding copy
  double decode_s = 0.0;          // decoding (the slowest rank's)
  int64_t generated_tokens = 0;   // over every row
  int64_t weight_bytes = 0;       // one rank's decoding weights (the largest)
  int64_t kv_cache_bytes = 0;     // one rank's largest KV cache
  DecodingLayout layout = DecodingLayout::Replicated;
};

struct MeshGenerationOptions {
  GenerationOptions generation;
  DecodingLayout layout = DecodingLayout::Auto;
  int64_t batch_size = 0;  // rows decoded at once per row group (<= 0: all of its rows)
};

// Every prompt (the same list on every rank; row i draws from stream i)
// generated with the model's current weights, on every rank. Collective over
// the mesh. The decoding copy and its caches are freed before it returns.
Generation generate_on_mesh(train::ShardedModel& model, const dist::DeviceMesh& mesh,
                            const config::ParallelismConfig& parallelism, at::ScalarType dtype,
                            const std::vector<std::vector<int64_t>>& prompts, const MeshGenerationOptions& options,
                            GenerationStats* stats = nullptr);

// The rows of `prompts` as one padded batch (pad_id), streams 0 .. B-1.
PromptBatch pad_prompts(const std::vector<std::vector<int64_t>>& prompts, Padding padding, int64_t pad_id);

}  // namespace tessel::policy
