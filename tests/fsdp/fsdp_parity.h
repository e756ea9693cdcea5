// The FSDP parity harness (SPEC 8): train TinyLM for a few AdamW steps once
// with plain libtorch on this rank (the reference: every dp rank's batch run
// in turn, gradients averaged), once with fully_shard over the given layout,
// and return what the tests compare: losses, full parameters, per-microbatch
// collective counts and the memory accounting.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <variant>

#include "dist/communicator.h"
#include "fsdp/fsdp_param_group.h"
#include "fsdp/fsdp_test_model.h"
#include "fsdp/fully_shard.h"
#include "fsdp/state_dict.h"
#include "optim/adamw.h"

namespace tessel::fsdp::testing {

enum class Accumulation { Sync, NoGradientSync, NoAllReduce };

struct ParityConfig {
  int replicate = 1;  // HSDP replicate size; shard size = world / replicate
  std::variant<bool, int> reshard_after_forward = true;
  int microbatches = 1;
  Accumulation accumulation = Accumulation::Sync;
  MixedPrecisionPolicy mp;
  int steps = 10;
  int layers = 3;
  uint64_t seed = 1234;
  bool activation_checkpointing = false;  // on the decoder layers (FSDP run only)
  bool node_shared_params = false;        // FSDPOptions::node_shared_params (FSDP run only)
};

struct Counts {
  int64_t forward_all_gathers = 0;            // shard group, during forward
  int64_t backward_all_gathers = 0;           // shard group + post-forward group, during backward
  int64_t backward_post_forward_gathers = 0;  // of which from the k-rank group
  int64_t reduce_scatters = 0;
  int64_t all_reduces = 0;  // replicate group
};

struct RunResult {
  std::vector<double> losses;
  std::map<std::string, at::Tensor> params;  // full fp32, after training
  at::Tensor initial_embedding;
  std::vector<Counts> counts;      // per microbatch of every step
  FSDPMemoryStats memory;          // after the last step
  int64_t max_peak_unsharded = 0;  // over all steps
  int64_t layer_unsharded_bytes = 0;
  int64_t root_unsharded_bytes = 0;
  at::ScalarType unsharded_dtype = at::kFloat;
  int64_t prefetches = 0;  // of the params forward computes with
  std::vector<std::pair<std::string, ShardedParameter>> sharded;
};

inline optim::AdamWOptions adamw_options() {
  optim::AdamWOptions o;
  o.lr = 1e-2;
  o.weight_decay = 0.01;
  o.beta1 = 0.9;
  o.beta2 = 0.95;
  o.eps = 1e-6;
  return o;
}

inline int64_t vocab_for(int world) { return 4 * world + 1; }

// Where each unique parameter is registered (to swap in low-precision copies).
struct Registration {
  nn::Module* module;
  std::string name;
  size_t index;
};
inline std::vector<Registration> registrations(TinyLM& model,
                                               const std::vector<at::Tensor>& params) {
  std::vector<Registration> out;
  for (const auto& [path, m] : nn::named_tessel_modules(model)) {
    for (const auto& item : m->named_parameters(/*recurse=*/false)) {
      for (size_t i = 0; i < params.size(); ++i) {
        if (item.value().is_same(params[i])) out.push_back({m, item.key(), i});
      }
    }
  }
  return out;
}

// Single-process truth: the dp ranks' batches one after the other, gradients
// summed and divided by the dp size. With a param_dtype the reference does by
// hand what mixed precision means: fp32 masters, forward/backward with
// param_dtype copies, their gradients summed in fp32.
inline RunResult run_reference(int world, const ParityConfig& s) {
  const int64_t vocab = vocab_for(world);
  auto model = make_model(vocab, s.layers, s.seed);
  const std::vector<at::Tensor> masters = unique_parameters(*model);
  const auto regs = registrations(*model, masters);
  optim::AdamW opt(masters, adamw_options());
  RunResult result;
  for (int step = 0; step < s.steps; ++step) {
    double sum = 0;
    std::vector<at::Tensor> grad_sum(masters.size());
    for (int m = 0; m < s.microbatches; ++m) {
      for (int r = 0; r < world; ++r) {
        at::Tensor ids = batch(vocab, step, m, r);
        if (!s.mp.param_dtype) {
          at::Tensor loss = lm_loss(model->call(ids), ids);
          (loss / static_cast<double>(world)).backward();
          sum += loss.item<double>();
          continue;
        }
        std::vector<at::Tensor> copies;
        for (const auto& p : masters)
          copies.push_back(p.detach().to(*s.mp.param_dtype).requires_grad_(true));
        for (const auto& reg : regs) reg.module->replace_parameter(reg.name, copies[reg.index]);
        at::Tensor loss = lm_loss(model->call(ids), ids);
        loss.backward();
        sum += loss.item<double>();
        for (size_t i = 0; i < masters.size(); ++i) {
          at::Tensor g = copies[i].grad().to(at::kFloat);
          grad_sum[i] = grad_sum[i].defined() ? grad_sum[i] + g : g;
        }
      }
    }
    if (s.mp.param_dtype) {
      for (const auto& reg : regs) reg.module->replace_parameter(reg.name, masters[reg.index]);
      for (size_t i = 0; i < masters.size(); ++i) masters[i].mutable_grad() = grad_sum[i] / world;
    }
    result.losses.push_back(sum / (world * s.microbatches));
    opt.step();
    opt.zero_grad();
  }
  for (const auto& item : model->named_parameters())
    result.params[item.key()] = item.value().detach().clone();
  return result;
}

// The shard and replicate groups of a layout (split once per layout, in the
// same order on every rank).
struct Groups {
  dist::CommunicatorPtr world, shard, replicate;
};
inline const Groups& groups_for(int replicate) {
  static std::map<int, Groups> cache;
  auto it = cache.find(replicate);
  if (it != cache.end()) return it->second;
  Groups g;
  g.world = dist::world();
  const int rank = g.world->rank();
  const int shard_size = g.world->size() / replicate;
  g.shard = g.world->split(rank / shard_size, rank % shard_size, "dp_shard");
  if (replicate > 1)
    g.replicate = g.world->split(rank % shard_size, rank / shard_size, "dp_replicate");
  return cache.emplace(replicate, g).first->second;
}

inline int64_t count(const dist::CommunicatorPtr& c, dist::CollectiveKind k) {
  return c ? c->counters().count(k) : 0;
}

inline RunResult run_fsdp(const ParityConfig& s) {
  const Groups& g = groups_for(s.replicate);
  const int world = g.world->size();
  const int64_t vocab = vocab_for(world);
  auto model = make_model(vocab, s.layers, s.seed);
  FSDPMesh mesh(g.shard, g.replicate);
  // output_dtype applies to the root only: a decoder layer casting its output
  // to fp32 would make the root's norm and lm_head mix fp32 and bf16.
  FSDPOptions layer_options{s.reshard_after_forward, s.mp};
  layer_options.mp_policy.output_dtype.reset();
  FSDPOptions root_options{s.reshard_after_forward, s.mp};
  layer_options.node_shared_params = root_options.node_shared_params = s.node_shared_params;
  std::vector<FSDPModule> layers;
  for (const auto& layer : model->decoder_layers()) {
    layer->set_activation_checkpointing(s.activation_checkpointing);
    layers.push_back(fully_shard(*layer, mesh, layer_options));
  }
  FSDPModule root = fully_shard(*model, mesh, root_options);
  optim::AdamW opt(unique_parameters(*model), adamw_options());

  RunResult result;
  for (auto& [name, t] : full_state_dict(*model)) {
    if (name == "embed_tokens.weight") result.initial_embedding = t;
  }
  for (auto& l : layers) {
    result.layer_unsharded_bytes =
        std::max(result.layer_unsharded_bytes, l.param_group()->unsharded_param_bytes());
  }
  result.root_unsharded_bytes = root.param_group()->unsharded_param_bytes();
  result.unsharded_dtype = root.param_group()->params().front()->unsharded_param().scalar_type();
  dist::CommunicatorPtr post_forward = layers.front().param_group()->post_forward_group();
  if (post_forward == g.shard) post_forward = nullptr;

  auto reset = [&] {
    g.shard->reset_counters();
    if (g.replicate) g.replicate->reset_counters();
    if (post_forward) post_forward->reset_counters();
  };
  using K = dist::CollectiveKind;
  for (int step = 0; step < s.steps; ++step) {
    root.reset_peak_memory();
    double sum = 0;
    for (int m = 0; m < s.microbatches; ++m) {
      const bool last = m + 1 == s.microbatches;
      if (s.accumulation == Accumulation::NoGradientSync) root.set_requires_gradient_sync(last);
      if (s.accumulation == Accumulation::NoAllReduce) root.set_requires_all_reduce(last);
      reset();
      at::Tensor ids = batch(vocab, step, m, g.world->rank());
      at::Tensor loss = lm_loss(model->call(ids), ids);
      Counts c;
      c.forward_all_gathers = count(g.shard, K::AllGather);
      loss.backward();
      c.backward_post_forward_gathers = count(post_forward, K::AllGather);
      c.backward_all_gathers =
          count(g.shard, K::AllGather) - c.forward_all_gathers + c.backward_post_forward_gathers;
      c.reduce_scatters = count(g.shard, K::ReduceScatter);
      c.all_reduces = count(g.replicate, K::AllReduce);
      result.counts.push_back(c);
      sum += loss.item<double>();
    }
    opt.step();
    result.memory = root.memory_stats();  // before zero_grad: grads still held
    opt.zero_grad();
    at::Tensor total = at::full({1}, sum, at::TensorOptions().dtype(at::kDouble));
    g.world->all_reduce(total);
    result.losses.push_back(total.item<double>() / (world * s.microbatches));
    result.max_peak_unsharded =
        std::max(result.max_peak_unsharded, root.memory_stats().peak_unsharded_param_bytes);
  }
  result.prefetches = root.prefetched_all_gathers();
  result.sharded = sharded_state_dict(*model);
  for (auto& [name, t] : full_state_dict(*model)) result.params[name] = t;
  return result;
}

}  // namespace tessel::fsdp::testing
