#include "policy/logprobs.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <vector>

#include "core/error.h"
#include "nn/format.h"
#include "loss/cross_entropy.h"
#include "parallel/load_balanced_chunks.h"
#include "tensor/chunking.h"
#include "train/context_batches.h"

namespace tessel::policy {

at::Tensor next_token_targets(const at::Tensor& input_ids, const at::Tensor& input_lengths) {
  if (input_ids.dim() != 2) {
    throw UsageError(fmt::format("input_ids must be [batch, sequence], got {} dims", input_ids.dim()));
  }
  const int64_t rows = input_ids.size(0), seq = input_ids.size(1);
  if (input_lengths.dim() != 1 || input_lengths.size(0) != rows) {
    throw UsageError(fmt::format("input_lengths must hold one length per row ({}), got shape {}", rows,
                                 nn::shape_string(input_lengths.sizes())));
  }
  const at::Tensor lengths = input_lengths.to(at::kLong);
  for (int64_t b = 0; b < rows; ++b) {
    const int64_t n = lengths[b].item<int64_t>();
    if (n < 1 || n > seq) {
      throw UsageError(fmt::format("input_lengths[{}] = {} is outside [1, {}] (the padded sequence length)", b, n,
                                   seq));
    }
  }
  at::Tensor targets = at::full({rows, seq}, -1, input_ids.options().dtype(at::kLong));
  if (seq < 2) return targets;
  targets.narrow(1, 0, seq - 1).copy_(input_ids.narrow(1, 1, seq - 1));
  // Position t predicts token t + 1, which is real only while t + 1 < length.
  const at::Tensor next = at::arange(1, seq + 1, targets.options()).unsqueeze(0);
  return targets.masked_fill_(next.ge(lengths.unsqueeze(1)), -1);
}

VocabSlice vocab_slice_of(const train::ShardedModel& model, const at::Tensor& logits) {
  const int64_t vocab = model.model->config().vocab_size;
  if (logits.size(-1) == vocab) return VocabSlice{0, vocab, nullptr};
  const auto& tp = model.tp_group;
  TESSEL_CHECK(logits.size(-1) == tensor::chunk_size(vocab, tp->size(), tp->rank()),
               "logits have {} columns: neither the vocabulary ({}) nor this rank's tp shard of it", logits.size(-1),
               vocab);
  return VocabSlice{tensor::chunk_offset(vocab, tp->size(), tp->rank()), vocab, tp};
}

at::Tensor logprobs_by_token(const at::Tensor& aligned) {
  at::Tensor out = at::zeros_like(aligned);
  const int64_t seq = aligned.size(1);
  if (seq > 1) out.narrow(1, 1, seq - 1).copy_(aligned.narrow(1, 0, seq - 1));
  return out;
}

at::Tensor logprobs_aligned_with_labels(const at::Tensor& by_token) {
  at::Tensor out = at::zeros_like(by_token);
  const int64_t seq = by_token.size(1);
  if (seq > 1) out.narrow(1, 0, seq - 1).copy_(by_token.narrow(1, 1, seq - 1));
  return out;
}

at::Tensor aligned_logprobs(const train::ShardedModel& model, const at::Tensor& logits, const at::Tensor& labels,
                            double temperature) {
  const int64_t rows = labels.size(0), positions = labels.size(1);
  return token_logprobs(logits.reshape({rows * positions, logits.size(-1)}), labels.reshape({-1}), temperature,
                        vocab_slice_of(model, logits))
      .view({rows, positions});
}

at::Tensor get_logprobs(train::ShardedModel& model, const dist::DeviceMesh& mesh, const at::Tensor& input_ids,
                        const at::Tensor& input_lengths, double temperature, bool fused_head) {
  at::NoGradGuard no_grad;
  const int cp = mesh.size("cp"), tp = mesh.size("tp");
  // Rows padded to whole load-balanced chunks (2·cp of them) each divisible
  // over tp (sequence parallelism cuts the sequence over tp); rows that
  // divide already keep their shape, so a training batch's rows get the very
  // arithmetic its training step gives them.
  const int64_t seq = input_ids.size(1), multiple = (cp > 1 ? 2 * cp : 1) * tp;
  const int64_t padded = (seq + multiple - 1) / multiple * multiple;
  train::MicroBatch rows;
  rows.input_ids = at::constant_pad_nd(input_ids.to(at::kLong), {0, padded - seq}, 0).to(mesh.device());
  const at::Tensor targets = next_token_targets(input_ids, input_lengths);
  // On the host: the losses do not read device targets.
  loss::check_labels_in_vocabulary(targets, model.model->config().vocab_size, -1, "token_logprobs");
  rows.labels = at::constant_pad_nd(targets, {0, padded - seq}, -1).to(mesh.device());
  const train::MicroBatch piece = train::context_parallel_slice(rows, cp, mesh.coordinate("cp"));
  const int64_t batch = piece.input_ids.size(0), local = piece.input_ids.size(1);
  at::Tensor aligned;
  if (fused_head) {
    const at::Tensor labels = piece.labels.masked_fill(piece.labels.lt(0), loss::kIgnoreIndex);
    aligned =
        model.model->forward_token_losses(piece.input_ids, piece.position_ids, piece.document_ids, labels, temperature)
            .token_losses.neg();
  } else {
    const at::Tensor logits = model.model->forward_logits(piece.input_ids, piece.position_ids, piece.document_ids);
    aligned = aligned_logprobs(model, logits, piece.labels, temperature);
  }
  if (cp > 1) {
    // Every rank's chunks (equal sizes: the rows were padded to 2·cp chunks),
    // then the rows joined and the padding dropped.
    const auto& group = mesh.group("cp");
    at::Tensor all = at::empty({cp * batch * local}, aligned.options());
    group->all_gather_into(all, aligned.contiguous().view({-1}));
    std::vector<at::Tensor> per_rank;
    for (int r = 0; r < cp; ++r) per_rank.push_back(all.narrow(0, r * batch * local, batch * local).view({batch, local}));
    aligned = parallel::join_load_balanced_chunks(per_rank, 1);
  }
  // Batches live on the CPU (the step moves them to the device).
  return logprobs_by_token(aligned.narrow(1, 0, seq).contiguous()).cpu();
}

}  // namespace tessel::policy
