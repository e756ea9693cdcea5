// The weights generation decodes with (SPEC 11, "refit"): a copy of the
// policy's current weights in a decoding layout, made once per GRPO step from
// the FSDP shards, so decoding never all-gathers weights per token. NeMo RL
// moves them to a separate inference engine (vLLM) every step; tessel keeps
// them in the training processes for as long as the rollouts take, and frees
// them (with the KV cache) before training goes on.
//
// Two layouts:
//   - Replicated: every rank holds the whole model and decodes its own rows
//     alone; the rows of a batch are split over the whole world.
//   - TensorParallel: the model laid out over the training mesh's tp group
//     with the run's tensor-parallel plan (without sequence parallelism: a
//     decoding step has one position per row), each rank holding its tp
//     piece; a tp group decodes the same rows together, and the rows are
//     split over the groups (the dp_cp coordinate). For models whose copy per
//     rank does not fit.
// `auto` picks TensorParallel when the run trains with tp > 1 (the model was
// split because it is large) and Replicated otherwise.
//
// The refit streams the parameters one at a time (fsdp::for_each_full_parameter:
// one all-gather over the FSDP shard group each), joins tp pieces over tp for
// the replicated layout and a mixture-of-experts model's experts over ep
// (decoding copies hold every expert), and casts to the run's compute dtype
// (policy.precision): beside the shards no more than one full parameter exists
// in transit. Context parallelism plays no part: decoding runs whole rows.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "config/parallelism_config.h"
#include "dist/device_mesh.h"
#include "models/causal_lm.h"
#include "train/model_setup.h"

namespace tessel::policy {

enum class DecodingLayout { Auto, Replicated, TensorParallel };

// "auto", "replicated", "tensor_parallel"; UsageError naming `key` otherwise.
DecodingLayout parse_decoding_layout(const std::string& value, const std::string& key);
std::string to_string(DecodingLayout layout);

class DecodingModel {
 public:
  // The refit. Collective over the mesh (every rank, the same layout).
  // `dtype`: the compute dtype of the copy (train::compute_dtype).
  DecodingModel(train::ShardedModel& trained, const dist::DeviceMesh& mesh,
                const config::ParallelismConfig& parallelism, DecodingLayout layout, at::ScalarType dtype);
  ~DecodingModel();
  DecodingModel(const DecodingModel&) = delete;
  DecodingModel& operator=(const DecodingModel&) = delete;

  models::CausalLM& model() { return *model_; }
  DecodingLayout layout() const { return layout_; }  // never Auto
  c10::Device device() const { return device_; }
  int64_t vocab_size() const { return model_->config().vocab_size; }
  // The ranks that decode the same rows together (null: this rank alone).
  const dist::CommunicatorPtr& tp_group() const { return tp_group_; }
  // The ranks that split a batch's rows among them: the world (replicated),
  // or one rank of each tp group (dp_cp).
  const dist::CommunicatorPtr& row_group() const { return row_group_; }
  // This rank's bytes of decoding weights.
  int64_t weight_bytes() const { return weight_bytes_; }

  // The logits of the whole vocabulary from this rank's [B, V_local] (under
  // tensor parallelism its slice of a vocab-parallel lm_head; all-gathered
  // over tp: B x V values, never a sequence's).
  at::Tensor whole_vocabulary(const at::Tensor& local_logits) const;

 private:
  std::shared_ptr<models::CausalLM> model_;
  DecodingLayout layout_;
  c10::Device device_;
  dist::CommunicatorPtr tp_group_, row_group_;
  int64_t weight_bytes_ = 0;
};

}  // namespace tessel::policy
