#include "nn/attention_blocks.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "core/error.h"
#include "nn/format.h"
#include "nn/onednn_sgemm.h"

namespace tessel::nn {

namespace {

// The block's batched products: oneDNN's sgemm per batch where Linear uses
// it too (nn/onednn_sgemm.h), at::bmm otherwise. No autograd: the callers
// are autograd functions' forward and backward.
at::Tensor batched_product(const at::Tensor& a, const at::Tensor& b) {
  if (onednn_sgemm_preferred() && onednn_bmm_applies(a, b)) return onednn_bmm(a, b);
  return at::bmm(a, b);
}

constexpr double kMinusInf = -std::numeric_limits<double>::infinity();

struct BlockShape {
  int64_t B, Hq, Tq, D, Hkv, Tk, group;
};

BlockShape block_shape(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TESSEL_CHECK(q.dim() == 4 && k.dim() == 4 && v.sizes() == k.sizes() && k.size(0) == q.size(0) &&
                   k.size(3) == q.size(3),
               "attention block: q {} k {} v {} do not match ([B, heads, T, D])", shape_string(q.sizes()),
               shape_string(k.sizes()), shape_string(v.sizes()));
  TESSEL_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0,
               "attention block: {} query heads are not a multiple of {} kv heads", q.size(1), k.size(1));
  return {q.size(0), q.size(1), q.size(2), q.size(3), k.size(1), k.size(2), q.size(1) / k.size(1)};
}

// The first key column of a block that the mask can hide: keys up to the
// block's first query are causally visible to every row, so without a window
// or documents only the columns from there on need masking.
int64_t first_maskable_column(const AttentionBlockMask& mask, const BlockShape& s) {
  if (mask.sliding_window || mask.query_documents.defined()) return 0;
  return std::clamp<int64_t>(mask.query_start + 1 - mask.key_start, 0, s.Tk);
}

// true = masked, for the key columns from `first_maskable_column` on:
// [Tq, Tk - first], or [B, 1, 1, Tq, Tk - first] with documents (broadcast
// over kv heads and their query groups); undefined when nothing is hidden.
at::Tensor hidden_keys(const AttentionBlockMask& mask, const BlockShape& s, const at::Device& device) {
  if (block_visibility(mask, s.Tq, s.Tk) == BlockVisibility::Full) return {};
  const int64_t first = first_maskable_column(mask, s);
  auto idx = at::TensorOptions().dtype(at::kLong).device(device);
  const at::Tensor i = at::arange(mask.query_start, mask.query_start + s.Tq, idx).unsqueeze(1);
  const at::Tensor j = at::arange(mask.key_start + first, mask.key_start + s.Tk, idx).unsqueeze(0);
  at::Tensor hidden = j > i;
  if (mask.sliding_window) hidden = hidden.logical_or(i - j >= *mask.sliding_window);
  if (mask.query_documents.defined()) {
    const at::Tensor other = mask.query_documents.to(device).unsqueeze(2).ne(mask.key_documents.to(device).unsqueeze(1));
    hidden = hidden.unsqueeze(0).logical_or(other).unsqueeze(1).unsqueeze(1);
  }
  return hidden;
}

// A run of kv heads [first, first + count) and their query heads, laid out
// for batched matmuls over (batch, kv head): one matmul per step of the block
// instead of one per kv head, so ATen's per-call cost is paid once per run
// (bench-medium, 64-row tiles, forward and backward: 14.2-14.5 ms per layer
// one head at a time, 11.7-11.8 ms all four at once).
struct HeadRun {
  int64_t first, count;
};

// Kv heads per run: as many as keep one run's scores within `budget` bytes,
// so long blocks (context parallelism) stay bounded in memory.
int64_t heads_per_run(const BlockShape& s, int64_t element_size, int64_t budget) {
  const int64_t per_head = s.B * s.group * s.Tq * s.Tk * element_size;
  return std::clamp<int64_t>(budget / std::max<int64_t>(per_head, 1), 1, s.Hkv);
}

// The run's queries times the scale, [B * count, group * Tq, D], contiguous;
// the scale folded into q (fewer elements than the scores, and exact for a
// power-of-two scale such as 1/sqrt(64)).
at::Tensor scaled_queries(const at::Tensor& q, const BlockShape& s, const HeadRun& run, double scale) {
  at::Tensor qs = at::empty({s.B, run.count * s.group, s.Tq, s.D}, q.options());
  qs.copy_(q.narrow(1, run.first * s.group, run.count * s.group)).mul_(scale);
  return qs.view({s.B * run.count, s.group * s.Tq, s.D});
}

// [B, Hkv, T, D] -> the run's heads as [B * count, T, D] (a view where the
// layout allows).
at::Tensor run_heads(const at::Tensor& t, const HeadRun& run) {
  return t.narrow(1, run.first, run.count).reshape({t.size(0) * run.count, t.size(2), t.size(3)});
}

// [B, H, ...] per query head -> the run's query heads as [B * count, group * Tq, ...].
at::Tensor run_rows(const at::Tensor& t, const BlockShape& s, const HeadRun& run, int64_t trailing) {
  std::vector<int64_t> shape{s.B * run.count, s.group * s.Tq};
  if (trailing > 0) shape.push_back(trailing);
  return t.narrow(1, run.first * s.group, run.count * s.group).reshape(shape);
}

// Scores of the run's query heads against their kv heads, [B * count,
// group * Tq, Tk], softcapped and masked; `tanh_out` receives tanh(raw / cap)
// when softcapping (its derivative needs it).
at::Tensor run_scores(const at::Tensor& qs, const at::Tensor& kg, const BlockShape& s, const HeadRun& run,
                      const at::Tensor& hidden, int64_t first_column, const AttentionScoring& scoring,
                      at::Tensor* tanh_out) {
  at::Tensor scores = batched_product(qs, kg.transpose(1, 2));
  if (scoring.logit_softcap) {
    const double cap = *scoring.logit_softcap;
    at::Tensor t = scores.div_(cap).tanh_();
    if (tanh_out) *tanh_out = t.clone();
    scores = t.mul_(cap);
  }
  if (hidden.defined()) {
    scores.view({s.B, run.count, s.group, s.Tq, s.Tk})
        .narrow(-1, first_column, s.Tk - first_column)
        .masked_fill_(hidden, kMinusInf);
  }
  return scores;
}

// lse with -inf (a row that sees nothing) replaced by 0, for exp(scores - lse).
at::Tensor finite_or_zero(const at::Tensor& lse) { return lse.masked_fill(lse == kMinusInf, 0.0); }

}  // namespace

BlockVisibility block_visibility(const AttentionBlockMask& mask, int64_t query_len, int64_t key_len) {
  const int64_t q_first = mask.query_start, q_last = mask.query_start + query_len - 1;
  const int64_t k_first = mask.key_start, k_last = mask.key_start + key_len - 1;
  if (query_len == 0 || key_len == 0 || k_first > q_last) return BlockVisibility::None;
  if (mask.sliding_window && q_first - k_last >= *mask.sliding_window) return BlockVisibility::None;
  const bool all_causal = k_last <= q_first;
  const bool all_in_window = !mask.sliding_window || q_last - k_first < *mask.sliding_window;
  if (all_causal && all_in_window && !mask.query_documents.defined()) return BlockVisibility::Full;
  return BlockVisibility::Partial;
}

AttentionBlockResult attention_block_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                             const AttentionBlockMask& mask, const AttentionScoring& scoring,
                                             int64_t score_bytes_budget, bool keep_probabilities) {
  const BlockShape s = block_shape(q, k, v);
  const at::Tensor hidden = hidden_keys(mask, s, q.device());
  const int64_t first_column = first_maskable_column(mask, s);
  const int64_t per_run = heads_per_run(s, q.element_size(), score_bytes_budget);
  const bool one_run = per_run == s.Hkv;
  // With every kv head in one run the run's results are the block's, viewed
  // ([B * Hkv, group * Tq, ...] holds [B, Hq, Tq, ...] in order); several
  // runs fill their heads of the block's tensors.
  AttentionBlockResult r;
  if (!one_run) {
    r.out = at::empty({s.B, s.Hq, s.Tq, s.D}, q.options());
    r.lse = at::empty({s.B, s.Hq, s.Tq}, q.options());
  }
  const bool keep = keep_probabilities && one_run && !scoring.logit_softcap;
  for (int64_t h = 0; h < s.Hkv; h += per_run) {
    const HeadRun run{h, std::min(per_run, s.Hkv - h)};
    at::Tensor scores = run_scores(scaled_queries(q, s, run, scoring.scale), run_heads(k, run), s, run, hidden,
                                   first_column, scoring, nullptr);
    // Softmax shifted by each row's maximum; the normalisation divides the
    // output ([rows, D]) rather than the probabilities ([rows, Tk]). Kept
    // probabilities are normalised after the output is made, so the output
    // has the same bits whether they are kept or not (a checkpointed layer's
    // forward without gradients and its recomputation agree).
    const at::Tensor top = finite_or_zero(scores.amax(-1, /*keepdim=*/true));  // 0 where all masked
    const at::Tensor p = scores.sub_(top).exp_();
    const at::Tensor total = p.sum(-1, /*keepdim=*/true);  // 0 only where all masked
    const at::Tensor divisor = total.masked_fill(total == 0, 1.0);
    const at::Tensor out = batched_product(p, run_heads(v, run)).div_(divisor);
    if (keep) r.probabilities = p.div_(divisor);
    const at::Tensor run_out = out.view({s.B, run.count * s.group, s.Tq, s.D});
    const at::Tensor run_lse = (top + total.log()).view({s.B, run.count * s.group, s.Tq});
    if (one_run) {
      r.out = run_out;
      r.lse = run_lse;
    } else {
      r.out.narrow(1, run.first * s.group, run.count * s.group).copy_(run_out);
      r.lse.narrow(1, run.first * s.group, run.count * s.group).copy_(run_lse);
    }
  }
  return r;
}

void merge_attention_block(const at::Tensor& out, const at::Tensor& lse, const AttentionBlockResult& block) {
  TESSEL_CHECK(out.sizes() == block.out.sizes() && lse.sizes() == block.lse.sizes(),
               "merge_attention_block: running {} / {} and block {} / {} differ", shape_string(out.sizes()),
               shape_string(lse.sizes()), shape_string(block.out.sizes()), shape_string(block.lse.sizes()));
  const at::Tensor top = finite_or_zero(at::maximum(lse, block.lse));
  const at::Tensor w_running = (lse - top).exp_();
  const at::Tensor w_block = (block.lse - top).exp_();
  const at::Tensor total = w_running + w_block;  // 0 only where neither saw a key
  const at::Tensor divisor = total.masked_fill(total == 0, 1.0);
  out.mul_((w_running / divisor).unsqueeze(-1)).add_(block.out * (w_block / divisor).unsqueeze(-1));
  lse.copy_(top + total.log());
}

AttentionBlockGrads attention_block_backward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                             const at::Tensor& dout, const at::Tensor& lse,
                                             const at::Tensor& delta, const AttentionBlockMask& mask,
                                             const AttentionScoring& scoring, int64_t score_bytes_budget,
                                             const at::Tensor& probabilities) {
  const BlockShape s = block_shape(q, k, v);
  TESSEL_CHECK(dout.sizes() == q.sizes() && lse.sizes() == q.sizes().slice(0, 3) && delta.sizes() == lse.sizes(),
               "attention block backward: dout {} lse {} delta {} do not match q {}", shape_string(dout.sizes()),
               shape_string(lse.sizes()), shape_string(delta.sizes()), shape_string(q.sizes()));
  // Kept probabilities hold every kv head in one run (attention_block_forward).
  const int64_t per_run =
      probabilities.defined() ? s.Hkv : heads_per_run(s, q.element_size(), score_bytes_budget);
  const bool one_run = per_run == s.Hkv;  // the run's gradients are the block's, viewed
  AttentionBlockGrads g;
  if (!one_run) g = {at::empty_like(q), at::empty_like(k), at::empty_like(v)};
  TESSEL_CHECK(!probabilities.defined() ||
                   (probabilities.sizes() == at::IntArrayRef({s.B * s.Hkv, s.group * s.Tq, s.Tk}) &&
                    !scoring.logit_softcap),
               "attention block backward: kept probabilities {} do not match [{}, {}, {}] (or a softcap is set)",
               shape_string(probabilities.sizes()), s.B * s.Hkv, s.group * s.Tq, s.Tk);
  const at::Tensor hidden = probabilities.defined() ? at::Tensor() : hidden_keys(mask, s, q.device());
  const int64_t first_column = first_maskable_column(mask, s);
  for (int64_t h = 0; h < s.Hkv; h += per_run) {
    const HeadRun run{h, std::min(per_run, s.Hkv - h)};
    const at::Tensor qs = scaled_queries(q, s, run, scoring.scale);
    const at::Tensor kg = run_heads(k, run), vg = run_heads(v, run);
    at::Tensor tanh_scores;
    at::Tensor p = probabilities;
    if (!p.defined()) {
      at::Tensor scores = run_scores(qs, kg, s, run, hidden, first_column, scoring,
                                     scoring.logit_softcap ? &tanh_scores : nullptr);
      p = scores.sub_(run_rows(finite_or_zero(lse), s, run, 1)).exp_();  // 0 where masked
    }
    const at::Tensor dog = run_rows(dout, s, run, s.D);
    const at::Tensor dv = batched_product(p.transpose(1, 2), dog);  // sums over the group's rows
    at::Tensor ds = batched_product(dog, vg.transpose(1, 2)).sub_(run_rows(delta, s, run, 1)).mul_(p);
    if (scoring.logit_softcap) ds.mul_(1.0 - tanh_scores.mul_(tanh_scores));  // d(cap*tanh(x/cap))/dx
    // d(scores)/dq = scale * k; d(scores)/dk = scale * q, already in qs.
    const at::Tensor dq = batched_product(ds, kg).mul_(scoring.scale);
    const at::Tensor dk = batched_product(ds.transpose(1, 2), qs);
    const at::Tensor run_dq = dq.view({s.B, run.count * s.group, s.Tq, s.D});
    const at::Tensor run_dk = dk.view({s.B, run.count, s.Tk, s.D}), run_dv = dv.view({s.B, run.count, s.Tk, s.D});
    if (one_run) {
      g = {run_dq, run_dk, run_dv};
    } else {
      g.dq.narrow(1, run.first * s.group, run.count * s.group).copy_(run_dq);
      g.dk.narrow(1, run.first, run.count).copy_(run_dk);
      g.dv.narrow(1, run.first, run.count).copy_(run_dv);
    }
  }
  return g;
}

}  // namespace tessel::nn
