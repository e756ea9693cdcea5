#include "train/train_step.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "loss/cross_entropy.h"
#include "loss/load_balancing_loss.h"
#include "loss/vocab_parallel_cross_entropy.h"
#include "tensor/chunking.h"
#include "optim/grad_norm.h"
#include "train/context_batches.h"

namespace tessel::train {

namespace {

// [valid, tokens] of this rank's batches, summed over the dp group.
std::pair<int64_t, int64_t> global_counts(const dist::DeviceMesh& mesh,
                                          const std::vector<MicroBatch>& batches) {
  int64_t valid = 0, tokens = 0;
  for (const auto& b : batches) {
    valid += b.labels.ne(loss::kIgnoreIndex).sum().item<int64_t>();
    tokens += b.num_tokens;
  }
  auto counts = at::tensor({valid, tokens}, at::kLong);
  mesh.group("dp")->all_reduce(counts);
  return {counts[0].item<int64_t>(), counts[1].item<int64_t>()};
}

// The tensors of a micro batch on `device` (the data loader makes them on the CPU).
MicroBatch on_device(MicroBatch b, c10::Device device) {
  if (device.is_cpu()) return b;
  for (at::Tensor* t :
       {&b.input_ids, &b.labels, &b.position_ids, &b.document_ids, &b.attention_mask}) {
    if (t->defined()) *t = t->to(device);
  }
  return b;
}

// This rank's piece of each micro batch, on its device: the whole rows, or
// under context parallelism its load-balanced chunks of them
// (context_batches.h).
std::vector<MicroBatch> local_pieces(const dist::DeviceMesh& mesh, const std::vector<MicroBatch>& batches) {
  const int cp = mesh.size("cp");
  std::vector<MicroBatch> out;
  out.reserve(batches.size());
  for (const auto& b : batches) {
    out.push_back(on_device(cp == 1 ? b : context_parallel_slice(b, cp, mesh.coordinate("cp")),
                            mesh.device()));
  }
  return out;
}

// Sums each value over the dp_cp group in double precision (each rank's
// share of the loss: its rows, or its chunks of them under context
// parallelism). The communicator
// reduces only fp32/bf16/fp16/int64, and an fp32 loss sum would round
// differently per layout; gathering the doubles and adding them in rank
// order gives every rank the same, layout-independent result.
std::vector<double> global_sums(const dist::DeviceMesh& mesh, const std::vector<double>& local) {
  const auto& dp = mesh.group("dp_cp");
  const auto n = static_cast<int64_t>(local.size());
  const auto mine = at::tensor(local, at::kDouble);
  auto all = at::zeros({dp->size() * n}, at::kDouble);
  dp->all_gather_into(all, mine);
  std::vector<double> out(local.size(), 0.0);
  const double* data = all.data_ptr<double>();
  for (int r = 0; r < dp->size(); ++r) {
    for (int64_t i = 0; i < n; ++i) out[i] += data[r * n + i];
  }
  return out;
}

// The loss sum of one micro batch. Logits narrower than the vocabulary are
// this rank's vocab shard (a column-parallel lm_head under tensor
// parallelism): the loss is then vocab-parallel cross-entropy, which never
// gathers them.
loss::LossSum loss_sum(const ShardedModel& model, const at::Tensor& logits, const at::Tensor& labels) {
  const int64_t vocab = model.model->config().vocab_size;
  if (logits.size(-1) == vocab) return loss::cross_entropy_sum(logits, labels);
  const auto& tp = model.tp_group;
  TESSEL_CHECK(logits.size(-1) == tensor::chunk_size(vocab, tp->size(), tp->rank()),
               "logits have {} columns: neither the vocabulary ({}) nor this rank's tp shard of it", logits.size(-1),
               vocab);
  return loss::vocab_parallel_cross_entropy_sum(logits, labels, tensor::chunk_offset(vocab, tp->size(), tp->rank()),
                                                vocab, tp);
}

}  // namespace

StepResult train_step(ShardedModel& model, optim::AdamW& optimizer, const dist::DeviceMesh& mesh,
                      const std::vector<MicroBatch>& micro_batches, double lr,
                      double max_grad_norm) {
  TESSEL_CHECK(!micro_batches.empty(), "a training step needs at least one micro batch");
  StepResult result;
  // Counted on the whole rows, which every cp rank of a dp rank shares.
  const auto [valid, tokens] = global_counts(mesh, micro_batches);
  const std::vector<MicroBatch> pieces = local_pieces(mesh, micro_batches);
  result.valid_tokens = valid;
  result.tokens = tokens;
  // A global batch without targets (every response truncated away) adds a
  // zero gradient instead of NaN.
  const double denom = static_cast<double>(std::max<int64_t>(valid, 1));

  double local_loss_sum = 0.0, local_aux_sum = 0.0;
  const size_t n = pieces.size();
  const models::ModelConfig& config = model.model->config();
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
    const models::CausalLMOutput out =
        model.model->forward_with_router_logits(mb.input_ids, mb.position_ids, mb.document_ids);
    const loss::LossSum ls = loss_sum(model, out.logits, mb.labels);
    local_loss_sum += ls.sum.detach().to(at::kDouble).item<double>();
    at::Tensor objective = ls.sum / denom;
    if (aux_loss) {
      const at::Tensor aux = loss::load_balancing_loss(out.router_logits, config.num_experts,
                                                       config.num_experts_per_tok, mb.attention_mask);
      local_aux_sum += aux.detach().to(at::kDouble).item<double>();
      objective = objective + aux * aux_scale;
    }
    objective.backward();
  }
  const std::vector<double> sums = global_sums(mesh, {local_loss_sum, local_aux_sum});
  result.aux_loss = sums[1] / static_cast<double>(n * mesh.group("dp")->size());
  result.loss = sums[0] / denom + (aux_loss ? config.router_aux_loss_coef * result.aux_loss : 0.0);
  result.grad_norm = optim::global_grad_norm(model.grad_sets());
  optimizer.set_lr(lr);
  // Clipping as a factor the update applies while reading each gradient: the
  // same values as scaling the gradients first, without a pass over them.
  optimizer.step(optim::clip_coefficient(result.grad_norm, max_grad_norm));
  optimizer.zero_grad();
  return result;
}

EvalResult evaluate(ShardedModel& model, const dist::DeviceMesh& mesh,
                    const std::vector<MicroBatch>& micro_batches) {
  at::NoGradGuard no_grad;
  double local_sum = 0.0;
  int64_t local_valid = 0;
  for (const auto& mb : local_pieces(mesh, micro_batches)) {
    const at::Tensor logits = model.model->forward_logits(mb.input_ids, mb.position_ids, mb.document_ids);
    const loss::LossSum ls = loss_sum(model, logits, mb.labels);
    local_sum += ls.sum.to(at::kDouble).item<double>();
    local_valid += ls.num_valid;
  }
  const auto sums = global_sums(mesh, {local_sum, static_cast<double>(local_valid)});
  EvalResult r;
  r.valid_tokens = static_cast<int64_t>(sums[1]);
  r.loss = r.valid_tokens > 0 ? sums[0] / sums[1] : std::numeric_limits<double>::quiet_NaN();
  return r;
}

}  // namespace tessel::train
