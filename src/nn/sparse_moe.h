// The sparse mixture-of-experts feed-forward block of Qwen3-MoE and Mixtral,
// with HF's names: a router `gate` (Linear hidden -> num_experts, no bias)
// and `experts.{e}` (GatedMLP each, Mixtral naming its projections w1/w3/w2).
//
// Routing, as HF does it: softmax of the router logits over all experts in
// float32, the top-k experts per token, the k weights renormalised to sum 1
// when `normalize_top_k` (Qwen3-MoE's norm_topk_prob; Mixtral always), then
// cast back to the activation dtype. Each token's output is the weighted sum
// of its k experts' outputs.
//
// Compute is grouped per expert: the (token, slot) assignments are sorted by
// expert once, then each expert runs one set of matmuls over all its tokens
// (gathered with index_select) and the weighted results are index_add-ed
// back. Every expert runs, also on zero tokens: an unused expert's gradients
// are then exact zeros (defined, never NaN), and every rank of a sharded run
// calls the same modules whatever its routing.
//
// The block returns the router logits as a second output: the load-balancing
// loss (loss/load_balancing_loss.h) needs those of all MoE layers at once,
// and an output (unlike a value kept in a member) stays on the autograd graph
// under activation checkpointing.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>
#include <functional>
#include <memory>

#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/module.h"

namespace tessel::nn {

// HF's routing of router logits [N, E]: {weights [N, k] in `dtype`, chosen
// expert ids [N, k]}.
struct Routing {
  at::Tensor weights;
  at::Tensor chosen;
};
Routing route_tokens(const at::Tensor& router_logits, int64_t top_k, bool normalize_top_k, at::ScalarType dtype);

struct SparseMoeOptions {
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // of one expert
  int64_t num_experts = 0;
  int64_t top_k = 0;
  bool normalize_top_k = false;
  Activation act = Activation::SiLU;
  GatedMLPNames expert_names;
};

// Runs the experts of a block whose experts are split over ranks (expert
// parallelism, parallel/expert_parallel.h): given the tokens [N, H], the
// routing and a way to run local expert i on rows, returns the combined output [N, H].
using ExpertDispatch = std::function<at::Tensor(const at::Tensor& tokens, const Routing& routing,
                                                const std::function<at::Tensor(int64_t, const at::Tensor&)>& run_local)>;

class SparseMoeBlock : public Module {
 public:
  SparseMoeBlock(const SparseMoeOptions& options, const at::TensorOptions& tensor_options);
  const SparseMoeOptions& options() const { return options_; }
  const std::shared_ptr<Linear>& gate() const { return gate_; }
  // The experts this block holds: all of them, or after keep_experts() the
  // local ones, registered under their global index (experts.{e}).
  const std::shared_ptr<ModuleList>& experts() const { return experts_; }
  // Keeps experts [first, first + count) only (the others are dropped, never
  // materialised on this rank) and routes through `dispatch` from then on.
  void keep_experts(int64_t first, int64_t count, ExpertDispatch dispatch);
  int64_t first_local_expert() const { return first_expert_; }

 protected:
  // {x [B, T, H]} -> {out [B, T, H], router_logits [B*T, num_experts]}
  Tensors forward(const Tensors& inputs) override;

 private:
  SparseMoeOptions options_;
  std::shared_ptr<Linear> gate_;
  std::shared_ptr<ModuleList> experts_;
  int64_t first_expert_ = 0;
  ExpertDispatch dispatch_;  // null: every expert is local
};

}  // namespace tessel::nn
