#include "nn/tiled_attention.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>

#include "core/error.h"
#include "core/host_to_device.h"
#include "nn/attention_blocks.h"
#include "nn/document_runs.h"
#include "nn/format.h"
#include "nn/gradient_layout.h"

namespace tessel::nn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// One query tile and the keys it can see.
struct Tile {
  int64_t q_start, q_len, k_start, k_len;
};

std::vector<Tile> tiles_of(int64_t T, int64_t tile, std::optional<int64_t> window) {
  std::vector<Tile> tiles;
  for (int64_t t0 = 0; t0 < T; t0 += tile) {
    const int64_t len = std::min(tile, T - t0);
    // The first query of the tile sees back to t0 - window + 1 at most.
    const int64_t k0 = window ? std::max<int64_t>(0, t0 - *window + 1) : 0;
    tiles.push_back({t0, len, k0, t0 + len - k0});
  }
  return tiles;
}

AttentionBlockMask tile_mask(const Tile& t, std::optional<int64_t> window, const at::Tensor& documents) {
  AttentionBlockMask m;
  m.query_start = t.q_start;
  m.key_start = t.k_start;
  m.sliding_window = window;
  if (documents.defined()) {
    m.query_documents = documents.narrow(1, t.q_start, t.q_len);
    m.key_documents = documents.narrow(1, t.k_start, t.k_len);
  }
  return m;
}

std::optional<int64_t> window_of(AutogradContext* ctx) {
  const int64_t w = ctx->saved_data["window"].toInt();
  return w > 0 ? std::optional<int64_t>(w) : std::nullopt;
}

AttentionScoring scoring_of(AutogradContext* ctx) {
  const double cap = ctx->saved_data["softcap"].toDouble();
  return {ctx->saved_data["scale"].toDouble(), cap > 0 ? std::optional<double>(cap) : std::nullopt};
}

// q, k, v, out and lse; the tiles' kept probabilities follow.
constexpr size_t kSavedTensors = 5;

// Backward can take the forward's softmax probabilities instead of computing
// the scores and their exponentials again (per tile: one of backward's five
// products fewer). They are kept while their bytes are no more than those of
// q, k, v and the output, which are saved anyway: short rows (bench-medium's
// 256 tokens in float32: 1280 probabilities per token against 1536 values),
// not long ones, whose probabilities grow with the row (~11x at 4096 tokens).
// Per batch row: `probabilities` over all query heads, the others per head.
bool keep_probabilities(int64_t probabilities, int64_t probability_bytes, int64_t q_heads, int64_t kv_heads,
                        int64_t T, int64_t head_dim, int64_t element_bytes) {
  return probabilities * probability_bytes <= (2 * q_heads + 2 * kv_heads) * T * head_dim * element_bytes;
}

int64_t probabilities_per_head(const std::vector<Tile>& tiles) {
  int64_t n = 0;
  for (const Tile& t : tiles) n += t.q_len * t.k_len;
  return n;
}

bool keep_probabilities(const std::vector<Tile>& tiles, const at::Tensor& q, const at::Tensor& k,
                        at::ScalarType compute) {
  return keep_probabilities(q.size(1) * probabilities_per_head(tiles), static_cast<int64_t>(c10::elementSize(compute)),
                            q.size(1), k.size(1), q.size(2), q.size(3), static_cast<int64_t>(q.element_size()));
}

struct TiledAttentionFunction : torch::autograd::Function<TiledAttentionFunction> {
  // Options travel as plain values (window 0 / softcap 0: none) because the
  // context stores IValues; document ids as an optional (autograd rejects
  // an undefined tensor argument).
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const c10::optional<at::Tensor>& document_ids, double scale, int64_t window,
                            double softcap, int64_t tile) {
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["window"] = window;
    ctx->saved_data["softcap"] = softcap;
    ctx->saved_data["tile"] = tile;
    const at::Tensor documents = document_ids ? document_ids->to(at::kLong) : at::Tensor();
    ctx->saved_data["documents"] = documents;
    const at::ScalarType compute = at::promote_types(q.scalar_type(), at::kFloat);
    // Keys and values head-major ([B, Hkv, T, D] in memory) once, so every
    // tile takes its key rows as a view: the attention module passes v as a
    // transposed view of its projection, which each tile would otherwise copy
    // again (forward and backward) for its batched products.
    const at::Tensor k_rows = k.contiguous(), v_rows = v.contiguous();
    // Their gradients are laid out as k and v were (gradient_layout.h).
    ctx->saved_data["k_strides"] = dense_layout(k);
    ctx->saved_data["v_strides"] = dense_layout(v);
    const at::Tensor qc = q.to(compute), kc = k_rows.to(compute), vc = v_rows.to(compute);
    at::Tensor out = at::empty(qc.sizes(), qc.options());
    at::Tensor lse = at::empty(qc.sizes().slice(0, 3), qc.options());
    const auto w = window_of(ctx);
    const std::vector<Tile> tiles = tiles_of(q.size(2), tile, w);
    // Only for a backward to come (not for evaluation without gradients).
    const bool keep = (q.requires_grad() || k.requires_grad() || v.requires_grad()) &&
                      keep_probabilities(tiles, q, k, compute);
    std::vector<at::Tensor> probabilities;
    for (const Tile& t : tiles) {
      AttentionBlockResult r = attention_block_forward(
          qc.narrow(2, t.q_start, t.q_len), kc.narrow(2, t.k_start, t.k_len), vc.narrow(2, t.k_start, t.k_len),
          tile_mask(t, w, documents), scoring_of(ctx), kDefaultScoreBytesBudget, keep);
      out.narrow(2, t.q_start, t.q_len).copy_(r.out);
      lse.narrow(2, t.q_start, t.q_len).copy_(r.lse);
      probabilities.push_back(std::move(r.probabilities));  // undefined where not kept
    }
    out = out.to(q.scalar_type());
    std::vector<at::Tensor> saved{q, k_rows, v_rows, out, lse};
    saved.insert(saved.end(), probabilities.begin(), probabilities.end());
    ctx->save_for_backward(saved);
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &out = saved[3], &lse = saved[4];
    const at::ScalarType compute = lse.scalar_type();
    const at::Tensor qc = q.to(compute), kc = k.to(compute), vc = v.to(compute);
    const at::Tensor dout = grads[0].to(compute).contiguous();
    // Row sums of dout * out: the softmax backward's correction term, shared
    // by every key of the row.
    const at::Tensor delta = (dout * out.to(compute)).sum(-1);
    const at::Tensor documents = ctx->saved_data["documents"].toTensor();
    at::Tensor dq = at::empty_like(qc);
    at::Tensor dk = at::empty_strided(kc.sizes(), ctx->saved_data["k_strides"].toIntVector(), kc.options());
    at::Tensor dv = at::empty_strided(vc.sizes(), ctx->saved_data["v_strides"].toIntVector(), vc.options());
    const auto w = window_of(ctx);
    const std::vector<Tile> tiles = tiles_of(q.size(2), ctx->saved_data["tile"].toInt(), w);
    // Tiles from the last: their key ranges end ever earlier, so dk and dv
    // hold the keys [written, T) so far; each tile writes the keys before
    // that range and adds to the rest (no zero fill, one pass fewer over the
    // keys the last tile sees: all of them without a window).
    int64_t written = q.size(2);
    for (size_t i = tiles.size(); i-- > 0;) {
      const Tile& t = tiles[i];
      // Each tile holds every key its queries see, so its own lse is the
      // final one and kept probabilities are exact.
      const AttentionBlockGrads g = attention_block_backward(
          qc.narrow(2, t.q_start, t.q_len), kc.narrow(2, t.k_start, t.k_len), vc.narrow(2, t.k_start, t.k_len),
          dout.narrow(2, t.q_start, t.q_len), lse.narrow(2, t.q_start, t.q_len), delta.narrow(2, t.q_start, t.q_len),
          tile_mask(t, w, documents), scoring_of(ctx), kDefaultScoreBytesBudget, saved[kSavedTensors + i]);
      dq.narrow(2, t.q_start, t.q_len).copy_(g.dq);
      const int64_t fresh = std::clamp<int64_t>(written - t.k_start, 0, t.k_len);  // keys not yet written
      for (auto [sum, part] : {std::pair{dk, g.dk}, std::pair{dv, g.dv}}) {
        sum.narrow(2, t.k_start, fresh).copy_(part.narrow(2, 0, fresh));
        sum.narrow(2, t.k_start + fresh, t.k_len - fresh).add_(part.narrow(2, fresh, t.k_len - fresh));
      }
      written = std::min(written, t.k_start);
    }
    // Keys before every tile's range get zero (there are none: each key is
    // seen by its own query).
    dk.narrow(2, 0, written).zero_();
    dv.narrow(2, 0, written).zero_();
    return {dq.to(q.scalar_type()), dk.to(k.scalar_type()), dv.to(v.scalar_type()), {}, {}, {}, {}, {}};
  }
};

}  // namespace

at::Tensor tiled_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                  std::optional<int64_t> sliding_window, std::optional<double> logit_softcap,
                                  const at::Tensor& document_ids, int64_t query_tile) {
  TESSEL_CHECK(q.dim() == 4 && k.dim() == 4 && v.sizes() == k.sizes() && k.size(0) == q.size(0) &&
                   k.size(2) == q.size(2) && k.size(3) == q.size(3),
               "tiled_causal_attention: q {} k {} v {} do not match ([B, heads, T, D], one T)",
               shape_string(q.sizes()), shape_string(k.sizes()), shape_string(v.sizes()));
  TESSEL_CHECK(k.size(1) > 0 && q.size(1) % k.size(1) == 0, "{} query heads are not a multiple of {} kv heads",
               q.size(1), k.size(1));
  TESSEL_CHECK(!sliding_window || *sliding_window > 0, "sliding window must be positive, got {}",
               sliding_window.value_or(0));
  TESSEL_CHECK(!logit_softcap || *logit_softcap > 0, "logit softcap must be positive, got {}",
               logit_softcap.value_or(0));
  TESSEL_CHECK(query_tile > 0, "query tile must be positive, got {}", query_tile);
  c10::optional<at::Tensor> documents;
  if (document_ids.defined()) {
    TESSEL_CHECK(document_ids.dim() == 2 && document_ids.size(0) == q.size(0) && document_ids.size(1) == q.size(2) &&
                     !at::isFloatingType(document_ids.scalar_type()),
                 "tiled_causal_attention: document_ids must be integer [{}, {}], got {} {}", q.size(0), q.size(2),
                 c10::toString(document_ids.scalar_type()), shape_string(document_ids.sizes()));
    documents = to_device_without_waiting(document_ids, q.device());
  }
  return TiledAttentionFunction::apply(q, k, v, documents, scale, sliding_window.value_or(0),
                                       logit_softcap.value_or(0.0), query_tile);
}

int64_t tiled_attention_kept_probabilities(int64_t T, int64_t q_heads, int64_t kv_heads, int64_t head_dim,
                                          int64_t element_bytes, std::optional<int64_t> sliding_window,
                                          int64_t query_tile) {
  const int64_t n = q_heads * probabilities_per_head(tiles_of(T, query_tile, sliding_window));
  const int64_t probability_bytes = std::max<int64_t>(element_bytes, 4);  // float32, float64 for float64
  return keep_probabilities(n, probability_bytes, q_heads, kv_heads, T, head_dim, element_bytes) ? n : 0;
}

}  // namespace tessel::nn
