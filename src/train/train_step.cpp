#include "train/train_step.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/host_to_device.h"
#include "data/collate.h"
#include "loss/cross_entropy.h"
#include "loss/load_balancing_loss.h"
#include "optim/grad_norm.h"
#include "train/context_batches.h"
#include "train/next_token_objective.h"
#include "train/step_objective.h"

namespace tessel::train {

namespace {

// The tensors of a micro batch on `device` (the data loader makes them on the
// CPU), but for document ids where `documents_stay_on_host`: attention reads
// their runs on the host (nn/document_runs.h), and reading a device's copy
// would wait for its queue at every layer. Copied without the host waiting
// for the device (core/host_to_device.h).
MicroBatch on_device(MicroBatch b, c10::Device device, bool documents_stay_on_host) {
  if (device.is_cpu()) return b;
  for (at::Tensor* t : {&b.input_ids, &b.labels, &b.position_ids, &b.attention_mask}) {
    *t = to_device_without_waiting(*t, device);
  }
  if (!documents_stay_on_host) b.document_ids = to_device_without_waiting(b.document_ids, device);
  for (auto* values : {&b.token_values, &b.row_values}) {
    for (auto& [name, t] : *values) t = to_device_without_waiting(t, device);
  }
  return b;
}

// This rank's piece of each micro batch, on its device: the whole rows, or
// under context parallelism its load-balanced chunks of them
// (context_batches.h). Labels are checked against the vocabulary here, on
// the host, before they move: the losses check only host labels, since
// reading a device's copy would wait for its queue in every micro batch.
std::vector<MicroBatch> local_pieces(const dist::DeviceMesh& mesh, const std::vector<MicroBatch>& batches,
                                     int64_t vocab) {
  const int cp = mesh.size("cp");
  std::vector<MicroBatch> out;
  out.reserve(batches.size());
  for (MicroBatch b : batches) {
    if (b.labels.defined()) loss::check_labels_in_vocabulary(b.labels, vocab, loss::kIgnoreIndex, "labels");
    // On a device, document ids that say no more than causal order are left
    // behind: with them every attention layer would build a [B, T, T] mask and
    // run the library's masked kernel over whole squares instead of its causal
    // one. Decided on the whole rows, before any context-parallel slicing, so
    // that a cp group's ranks (same rows) decide alike: ring attention gathers
    // the ids over the group when they are there.
    if (!mesh.device().is_cpu() && data::documents_are_whole_rows(b.document_ids)) {
      b.document_ids = at::Tensor();
    }
    // Ring attention gathers the ids over the cp group: there they go along.
    out.push_back(on_device(cp == 1 ? b : context_parallel_slice(b, cp, mesh.coordinate("cp")),
                            mesh.device(), /*documents_stay_on_host=*/cp == 1));
  }
  return out;
}

// `sums` without its entry `name` (moved into `value`).
Metrics take_out(Metrics sums, const std::string& name, double& value) {
  for (auto it = sums.begin(); it != sums.end(); ++it) {
    if (it->first == name) {
      value = it->second;
      sums.erase(it);
      break;
    }
  }
  return sums;
}

constexpr const char* kAuxSum = "__aux_loss_sum";

// One piece through the model and the objective: its (normalised) loss and
// the MoE layers' router logits. From the logits, or, where the objective
// fuses the head's loss (policy.fused_lm_head_loss), from the positions'
// losses.
struct PieceLoss {
  at::Tensor loss;
  std::vector<at::Tensor> router_logits;
};

PieceLoss piece_loss(ShardedModel& model, const dist::DeviceMesh& mesh, StepObjective& objective,
                     const MicroBatch& mb) {
  if (objective.fuses_head_loss()) {
    models::CausalLMOutput out =
        model.model->forward_token_losses(mb.input_ids, mb.position_ids, mb.document_ids, mb.labels,
                                          objective.head_loss_temperature());
    return {objective.micro_batch_loss_of_head(mesh, out.token_losses, mb), std::move(out.router_logits)};
  }
  models::CausalLMOutput out = model.model->forward_with_router_logits(mb.input_ids, mb.position_ids, mb.document_ids);
  return {objective.micro_batch_loss(model, mesh, out.logits, mb), std::move(out.router_logits)};
}

}  // namespace

StepResult train_step(ShardedModel& model, optim::AdamW& optimizer, const dist::DeviceMesh& mesh,
                      const std::vector<MicroBatch>& micro_batches, StepObjective& objective, double lr,
                      double max_grad_norm) {
  TESSEL_CHECK(!micro_batches.empty(), "a training step needs at least one micro batch");
  StepResult result;
  // Counted on the whole rows, which every cp rank of a dp rank shares.
  const StepCounts counts = objective.begin(mesh, micro_batches);
  const models::ModelConfig& config = model.model->config();
  const std::vector<MicroBatch> pieces = local_pieces(mesh, micro_batches, config.vocab_size);
  result.valid_tokens = counts.valid_tokens;
  result.tokens = counts.tokens;

  const size_t n = pieces.size();
  const bool aux_loss = models::is_moe(config) && config.output_router_logits;
  // Every rank runs n micro batches: the aux term is a mean over all of them.
  const double aux_scale = config.router_aux_loss_coef / static_cast<double>(n * mesh.group("dp")->size());
  for (size_t i = 0; i < n; ++i) {
    // Default: every micro batch reduce-scatters into the sharded gradients
    // and only the last one runs HSDP's replicate all-reduce. Opt-in: earlier
    // micro batches keep full-size local gradients and the last reduces them.
    const bool last = i + 1 == n;
    model.root.set_requires_gradient_sync(model.accumulation == GradAccumulation::ReduceScatterEach || last);
    model.root.set_requires_all_reduce(last);
    const auto& mb = pieces[i];
    PieceLoss piece = piece_loss(model, mesh, objective, mb);
    at::Tensor loss = std::move(piece.loss);
    if (aux_loss) {
      const at::Tensor aux = loss::load_balancing_loss(piece.router_logits, config.num_experts,
                                                       config.num_experts_per_tok, mb.attention_mask);
      objective.sums().add(kAuxSum, aux);
      loss = loss + aux * aux_scale;
    }
    loss.backward();
  }
  // One read of the device and one gather carry the objective's sums and the
  // aux term's.
  double aux_sum = 0.0;
  result.metrics = objective.finish(take_out(sum_over_dp_cp(mesh, objective.sums().take()), kAuxSum, aux_sum));
  result.aux_loss = aux_sum / static_cast<double>(n * mesh.group("dp")->size());
  result.loss = metric(result.metrics, "loss") + (aux_loss ? config.router_aux_loss_coef * result.aux_loss : 0.0);
  result.grad_norm = optim::global_grad_norm(model.grad_sets());
  optimizer.set_lr(lr);
  // Clipping as a factor the update applies while reading each gradient: the
  // same values as scaling the gradients first, without a pass over them.
  // Split over replicas, each group's updated part is sent on as soon as it
  // is updated; the group's next all-gather waits for it (the cross-replica
  // link then works through the next forward).
  optimizer.step(optim::clip_coefficient(result.grad_norm, max_grad_norm),
                 [&](size_t i) { model.send_updated_part(i); });
  optimizer.zero_grad();
  return result;
}

StepResult train_step(ShardedModel& model, optim::AdamW& optimizer, const dist::DeviceMesh& mesh,
                      const std::vector<MicroBatch>& micro_batches, double lr, double max_grad_norm) {
  NextTokenObjective objective;
  return train_step(model, optimizer, mesh, micro_batches, objective, lr, max_grad_norm);
}

EvalResult evaluate(ShardedModel& model, const dist::DeviceMesh& mesh,
                    const std::vector<MicroBatch>& micro_batches, StepObjective& objective) {
  at::NoGradGuard no_grad;
  const StepCounts counts = objective.begin(mesh, micro_batches);
  for (const auto& mb : local_pieces(mesh, micro_batches, model.model->config().vocab_size)) {
    piece_loss(model, mesh, objective, mb);
  }
  EvalResult r;
  r.valid_tokens = counts.valid_tokens;
  r.metrics = objective.finish(sum_over_dp_cp(mesh, objective.sums().take()));
  r.loss = r.valid_tokens > 0 ? metric(r.metrics, "loss") : std::numeric_limits<double>::quiet_NaN();
  return r;
}

EvalResult evaluate(ShardedModel& model, const dist::DeviceMesh& mesh,
                    const std::vector<MicroBatch>& micro_batches) {
  NextTokenObjective objective;
  return evaluate(model, mesh, micro_batches, objective);
}

}  // namespace tessel::train
