#include "nn/attention_blocks.h"

#include <ATen/ATen.h>

#include <limits>

#include "core/error.h"
#include "nn/format.h"

namespace tessel::nn {

namespace {

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

// true = masked; [Tq, Tk], or [B, 1, Tq, Tk] with documents (broadcasts over
// the group's heads); undefined when the block is fully visible.
at::Tensor hidden_keys(const AttentionBlockMask& mask, const BlockShape& s, const at::Device& device) {
  if (block_visibility(mask, s.Tq, s.Tk) == BlockVisibility::Full) return {};
  auto idx = at::TensorOptions().dtype(at::kLong).device(device);
  const at::Tensor i = at::arange(mask.query_start, mask.query_start + s.Tq, idx).unsqueeze(1);
  const at::Tensor j = at::arange(mask.key_start, mask.key_start + s.Tk, idx).unsqueeze(0);
  at::Tensor hidden = j > i;
  if (mask.sliding_window) hidden = hidden.logical_or(i - j >= *mask.sliding_window);
  if (mask.query_documents.defined()) {
    const at::Tensor other = mask.query_documents.to(device).unsqueeze(2).ne(mask.key_documents.to(device).unsqueeze(1));
    hidden = hidden.unsqueeze(0).logical_or(other).unsqueeze(1);
  }
  return hidden;
}

// Scores of one kv head's query group, [B, group, Tq, Tk], masked; `tanh_out`
// receives tanh(raw / cap) when softcapping (its derivative needs it).
at::Tensor group_scores(const at::Tensor& qg, const at::Tensor& kg, const BlockShape& s, const at::Tensor& hidden,
                        const AttentionScoring& scoring, at::Tensor* tanh_out) {
  at::Tensor scores = at::bmm(qg, kg.transpose(1, 2)).mul_(scoring.scale);  // [B, group*Tq, Tk]
  if (scoring.logit_softcap) {
    const double cap = *scoring.logit_softcap;
    at::Tensor t = scores.div_(cap).tanh_();
    if (tanh_out) *tanh_out = t.clone();
    scores = t.mul_(cap);
  }
  scores = scores.view({s.B, s.group, s.Tq, s.Tk});
  if (hidden.defined()) scores.masked_fill_(hidden, kMinusInf);
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
                                             const AttentionBlockMask& mask, const AttentionScoring& scoring) {
  const BlockShape s = block_shape(q, k, v);
  const at::Tensor hidden = hidden_keys(mask, s, q.device());
  AttentionBlockResult r{at::empty({s.B, s.Hq, s.Tq, s.D}, q.options()), at::empty({s.B, s.Hq, s.Tq}, q.options())};
  for (int64_t g = 0; g < s.Hkv; ++g) {
    const at::Tensor qg = q.narrow(1, g * s.group, s.group).reshape({s.B, s.group * s.Tq, s.D});
    at::Tensor scores = group_scores(qg, k.select(1, g), s, hidden, scoring, nullptr);
    const at::Tensor lse = at::logsumexp(scores, -1);  // [B, group, Tq]; -inf where all masked
    at::Tensor p = scores.sub_(finite_or_zero(lse).unsqueeze(-1)).exp_();
    const at::Tensor out = at::bmm(p.view({s.B, s.group * s.Tq, s.Tk}), v.select(1, g));
    r.out.narrow(1, g * s.group, s.group).copy_(out.view({s.B, s.group, s.Tq, s.D}));
    r.lse.narrow(1, g * s.group, s.group).copy_(lse);
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
                                             const AttentionScoring& scoring) {
  const BlockShape s = block_shape(q, k, v);
  TESSEL_CHECK(dout.sizes() == q.sizes() && lse.sizes() == q.sizes().slice(0, 3) && delta.sizes() == lse.sizes(),
               "attention block backward: dout {} lse {} delta {} do not match q {}", shape_string(dout.sizes()),
               shape_string(lse.sizes()), shape_string(delta.sizes()), shape_string(q.sizes()));
  const at::Tensor hidden = hidden_keys(mask, s, q.device());
  AttentionBlockGrads g{at::empty_like(q), at::empty_like(k), at::empty_like(v)};
  for (int64_t h = 0; h < s.Hkv; ++h) {
    const int64_t rows = s.group * s.Tq;
    const at::Tensor qg = q.narrow(1, h * s.group, s.group).reshape({s.B, rows, s.D});
    const at::Tensor kg = k.select(1, h), vg = v.select(1, h);
    at::Tensor tanh_scores;
    at::Tensor scores = group_scores(qg, kg, s, hidden, scoring, scoring.logit_softcap ? &tanh_scores : nullptr);
    const at::Tensor row_lse = finite_or_zero(lse.narrow(1, h * s.group, s.group)).unsqueeze(-1);
    const at::Tensor p = scores.sub_(row_lse).exp_().view({s.B, rows, s.Tk});  // 0 where masked
    const at::Tensor dog = dout.narrow(1, h * s.group, s.group).reshape({s.B, rows, s.D});
    g.dv.select(1, h).copy_(at::bmm(p.transpose(1, 2), dog));
    const at::Tensor row_delta = delta.narrow(1, h * s.group, s.group).reshape({s.B, rows, 1});
    at::Tensor ds = at::bmm(dog, vg.transpose(1, 2)).sub_(row_delta).mul_(p);  // d(scores)
    if (scoring.logit_softcap) ds.mul_(1.0 - tanh_scores.mul_(tanh_scores));  // d(cap*tanh(x/cap))/dx
    ds.mul_(scoring.scale);
    g.dq.narrow(1, h * s.group, s.group).copy_(at::bmm(ds, kg).view({s.B, s.group, s.Tq, s.D}));
    g.dk.select(1, h).copy_(at::bmm(ds.transpose(1, 2), qg));
  }
  return g;
}

}  // namespace tessel::nn
