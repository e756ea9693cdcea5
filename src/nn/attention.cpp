#include "nn/attention.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

#include "core/device_kernel_choice.h"
#include "core/error.h"
#include "nn/document_runs.h"
#include "nn/format.h"
#include "nn/library_attention.h"
#include "nn/rotary.h"
#include "nn/tiled_attention.h"
#include "nn/varlen_attention.h"

namespace tessel::nn {

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double scale, std::optional<int64_t> sliding_window,
                            std::optional<double> logit_softcap, const at::Tensor& document_ids) {
  TESSEL_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
               "causal_attention expects [B, heads, T, D] tensors");
  const int64_t B = q.size(0), Hq = q.size(1), T = q.size(2), D = q.size(3);
  const int64_t Hkv = k.size(1);
  TESSEL_CHECK(k.size(0) == B && k.size(2) == T && k.size(3) == D && v.sizes() == k.sizes(),
               "causal_attention: q {} k {} v {} do not match", shape_string(q.sizes()),
               shape_string(k.sizes()), shape_string(v.sizes()));
  TESSEL_CHECK(Hkv > 0 && Hq % Hkv == 0, "{} query heads are not a multiple of {} kv heads", Hq, Hkv);
  TESSEL_CHECK(!sliding_window || *sliding_window > 0, "sliding window must be positive, got {}",
               sliding_window.value_or(0));
  const int64_t group = Hq / Hkv;
  // At least fp32 (HF's softmax dtype); float64 inputs keep float64.
  const at::ScalarType softmax_dtype = at::promote_types(q.scalar_type(), at::kFloat);

  auto idx_opts = at::TensorOptions().dtype(at::kLong).device(q.device());
  at::Tensor i = at::arange(T, idx_opts).unsqueeze(1);
  at::Tensor j = at::arange(T, idx_opts).unsqueeze(0);
  at::Tensor hidden = j > i;  // true = masked
  if (sliding_window) hidden = hidden.logical_or(i - j >= *sliding_window);
  if (document_ids.defined()) {
    TESSEL_CHECK(document_ids.dim() == 2 && document_ids.size(0) == B &&
                     document_ids.size(1) == T && !at::isFloatingType(document_ids.scalar_type()),
                 "causal_attention: document_ids must be integer [{}, {}], got {} {}", B, T,
                 c10::toString(document_ids.scalar_type()), shape_string(document_ids.sizes()));
    at::Tensor doc = document_ids.to(q.device());
    // [B, T, 1] != [B, 1, T] -> [B, T, T]; [B, 1, T, T] broadcasts over the group.
    at::Tensor other_document = doc.unsqueeze(2).ne(doc.unsqueeze(1));
    hidden = hidden.unsqueeze(0).logical_or(other_document).unsqueeze(1);
  }

  std::vector<at::Tensor> outs;
  outs.reserve(static_cast<std::size_t>(Hkv));
  for (int64_t g = 0; g < Hkv; ++g) {
    // Fold the group's query heads into the row dim: one bmm against one K.
    at::Tensor qg = q.narrow(1, g * group, group).reshape({B, group * T, D});
    at::Tensor kg = k.select(1, g);  // [B, T, D]
    at::Tensor vg = v.select(1, g);
    at::Tensor scores = at::bmm(qg, kg.transpose(1, 2)).mul(scale);  // [B, group*T, T]
    if (logit_softcap) scores = at::tanh(scores / *logit_softcap) * *logit_softcap;
    scores = scores.view({B, group, T, T}).masked_fill(hidden, -std::numeric_limits<double>::infinity());
    at::Tensor probs = at::softmax(scores, -1, softmax_dtype).to(q.scalar_type());
    outs.push_back(at::bmm(probs.view({B, group * T, T}), vg).view({B, group, T, D}));
  }
  return Hkv == 1 ? outs[0] : at::cat(outs, 1);
}

Attention::Attention(const AttentionOptions& o, const at::TensorOptions& t)
    : Module("Attention"), options_(o) {
  TESSEL_CHECK(o.hidden_size > 0 && o.num_heads > 0 && o.num_kv_heads > 0 && o.head_dim > 0,
               "attention sizes must be positive (hidden {}, heads {}, kv heads {}, head_dim {})",
               o.hidden_size, o.num_heads, o.num_kv_heads, o.head_dim);
  TESSEL_CHECK(o.num_heads % o.num_kv_heads == 0,
               "num_attention_heads ({}) must be a multiple of num_key_value_heads ({})", o.num_heads,
               o.num_kv_heads);
  if (options_.scale == 0) options_.scale = 1.0 / std::sqrt(static_cast<double>(o.head_dim));
  q_proj_ = register_module("q_proj", std::make_shared<Linear>(o.hidden_size, o.num_heads * o.head_dim, o.qkv_bias, t));
  k_proj_ = register_module("k_proj", std::make_shared<Linear>(o.hidden_size, o.num_kv_heads * o.head_dim, o.qkv_bias, t));
  v_proj_ = register_module("v_proj", std::make_shared<Linear>(o.hidden_size, o.num_kv_heads * o.head_dim, o.qkv_bias, t));
  o_proj_ = register_module("o_proj", std::make_shared<Linear>(o.num_heads * o.head_dim, o.hidden_size, o.o_bias, t));
  if (o.qk_norm) {
    q_norm_ = register_module("q_norm", std::make_shared<RMSNorm>(o.head_dim, o.norm_eps, o.norm_style, t));
    k_norm_ = register_module("k_norm", std::make_shared<RMSNorm>(o.head_dim, o.norm_eps, o.norm_style, t));
  }
}

Tensors Attention::forward(const Tensors& inputs) {
  TESSEL_CHECK(inputs.size() == 3 || inputs.size() == 4,
               "Attention {} takes {{x, cos, sin[, document_ids]}}, got {} inputs", path(),
               inputs.size());
  const at::Tensor& x = inputs[0];
  TESSEL_CHECK(x.dim() == 3, "Attention {} expects x [B, T, hidden], got {} dims", path(), x.dim());
  const int64_t B = x.size(0), T = x.size(1), D = options_.head_dim;

  // [B, T, heads*D] -> [B, T, heads, D], heads from the current (maybe sharded) width.
  auto heads = [&](const at::Tensor& y, const char* what) {
    TESSEL_CHECK(y.size(-1) % D == 0, "Attention {}: {} width {} is not a multiple of head_dim {}",
                 path(), what, y.size(-1), D);
    return y.view({B, T, y.size(-1) / D, D});
  };
  at::Tensor q = heads(q_proj_->call(x), "q_proj");
  at::Tensor k = heads(k_proj_->call(x), "k_proj");
  at::Tensor v = heads(v_proj_->call(x), "v_proj");
  if (q_norm_) {
    q = q_norm_->call(q);
    k = k_norm_->call(k);
  }
  q = apply_rotary(q.transpose(1, 2), inputs[1], inputs[2]);
  k = apply_rotary(k.transpose(1, 2), inputs[1], inputs[2]);
  v = v.transpose(1, 2);

  const at::Tensor document_ids = inputs.size() > 3 ? inputs[3] : at::Tensor();
  // [B, Hq, T, D]
  at::Tensor out;
  // Host ids (train_step leaves them there) are read for their runs.
  std::optional<DocumentRuns> runs;
  if (!kernel_ && document_ids.defined() && document_ids.device().is_cpu()) runs = document_runs(document_ids);
  if (kernel_) {
    out = kernel_(q, k, v, options_.scale, options_.sliding_window, options_.logit_softcap, document_ids);
  } else if (takes_varlen(q, runs.has_value(), document_ids.defined())) {
    const double scale = options_.scale;
    out = attend_varlen(q, k, v, runs ? *runs : whole_rows(B, T), options_.sliding_window,
                        [scale](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c,
                                const at::Tensor& cumulative_lengths, int64_t longest, std::optional<int64_t> window) {
                          return library_varlen_attention(a, b, c, cumulative_lengths, longest, window, scale);
                        });
  } else if (runs && per_document_pays(*runs, T, !q.device().is_cpu(), options_.sliding_window)) {
    // A row of many very short documents stays one masked pass.
    const CausalAttentionCore plain = [this](const at::Tensor& qd, const at::Tensor& kd, const at::Tensor& vd) {
      return core(qd, kd, vd, at::Tensor());
    };
    out = attend_per_document(q, k, v, *runs, plain);
  } else {
    out = core(q, k, v, document_ids);
  }
  out = out.transpose(1, 2).reshape({B, T, q.size(1) * D});
  return {o_proj_->call(out)};
}

bool Attention::takes_varlen(const at::Tensor& q, bool host_runs, bool has_document_ids) const {
  // Where documents or a window restrict a row (documents only as host runs)
  // and the library's variable-length kernel takes the tensors; under
  // TESSEL_DEVICE_KERNELS=fused until a GPU has measured it.
  const bool restricted = host_runs || (!has_document_ids && options_.sliding_window);
  return restricted && !options_.logit_softcap && library_varlen_attention_fits(q) &&
         device_kernels_chosen(library_varlen_attention_built());
}

at::Tensor Attention::core(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const at::Tensor& document_ids) const {
  // On the CPU the library's kernel only for plain causal rows (tessel's
  // tiled kernel is faster with a mask there); on a device also with a
  // window or documents, as a mask (a window in bands of queries where the
  // row is long enough, nn/window_bands.h). Softcapping has no library kernel.
  if (library_attention_available() && !options_.logit_softcap &&
      (!q.device().is_cpu() || (!options_.sliding_window && !document_ids.defined()))) {
    return library_causal_attention(q, k, v, options_.scale, options_.sliding_window, document_ids);
  }
  return tiled_causal_attention(q, k, v, options_.scale, options_.sliding_window, options_.logit_softcap,
                                document_ids);
}

}  // namespace tessel::nn
