// Causal self-attention with grouped-query heads and Hugging Face names
// (q_proj, k_proj, v_proj, o_proj, optional per-head q_norm/k_norm).
//
// Head counts are derived at each call from the current q_proj/k_proj output
// widths and the fixed head_dim, so a tensor-parallel shard holding a subset
// of the heads runs unchanged. Query heads share their key/value head
// (grouped-query attention) without repeated K/V copies.
//
// Packed rows (data/collate.h, [Note: packing and attention]): an optional
// document_ids [B, T] integer tensor makes the mask block-diagonal causal:
// query t sees key s only if document_ids[t] == document_ids[s] and s <= t
// (and, with a sliding window, t - s < window). Padding (-1) is a "document"
// of its own, so real tokens never see it and no row is fully masked. Without
// document_ids the mask is the plain causal one over the whole row, computed
// exactly as before.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "nn/linear.h"
#include "nn/module.h"
#include "nn/rms_norm.h"

namespace tessel::nn {

struct AttentionOptions {
  int64_t hidden_size = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  bool qkv_bias = false;  // bias on q/k/v_proj (Qwen2; Llama attention_bias)
  bool o_bias = false;    // bias on o_proj (Llama attention_bias)
  // Per-head RMSNorm over head_dim of Q and K, before RoPE (Qwen3, Gemma3).
  bool qk_norm = false;
  RMSNormStyle norm_style = RMSNormStyle::Llama;
  double norm_eps = 1e-6;
  double scale = 0;  // multiplier of q·k; 0 means head_dim^-0.5
  // Keys visible from query i: i - window < j <= i (Mistral, Gemma3 local).
  std::optional<int64_t> sliding_window;
  std::optional<double> logit_softcap;  // scores -> cap * tanh(scores / cap)
};

// The attention core. q [B, Hq, T, D], k and v [B, Hkv, T, D] with Hkv
// dividing Hq (query head h uses kv head h / (Hq / Hkv)). Returns [B, Hq, T, D].
// Causal by sequence index; softmax in float32 (float64 for float64 inputs),
// probabilities cast back to the input dtype. document_ids (optional, [B, T]
// integer): additionally restricts each query to keys of its own document.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            double scale, std::optional<int64_t> sliding_window = std::nullopt,
                            std::optional<double> logit_softcap = std::nullopt,
                            const at::Tensor& document_ids = {});

// The attention core an Attention module runs on its rotated q, k, v: by
// default tiled_causal_attention over the rank's whole rows (same mask and
// result as causal_attention, which stays the reference; the tiled kernel
// skips the masked half of the scores and keeps no T x T tensor for backward,
// nn/tiled_attention.h), or, in builds against libtorch 2.5+ and for plain
// causal rows (no window, softcap or documents), libtorch's fused kernel
// (nn/library_attention.h; measured faster, docs/libtorch2.md). Packed rows
// whose document ids are on the host run that core once per document
// (nn/document_runs.h: no mask, no cross-document scores; on a device the
// library's causal kernel). On a device in bfloat16 or float16 with
// TESSEL_DEVICE_KERNELS=fused, rows with documents or a window go to the
// library's variable-length flash kernel in one call instead
// (nn/varlen_attention.h). Context parallelism
// installs one that runs a ring over the cp group (parallel/context_parallel.h).
using AttentionKernel = std::function<at::Tensor(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
    std::optional<int64_t> sliding_window, std::optional<double> logit_softcap, const at::Tensor& document_ids)>;

class Attention : public Module {
 public:
  Attention(const AttentionOptions& options, const at::TensorOptions& tensor_options);
  const AttentionOptions& options() const { return options_; }
  const std::shared_ptr<Linear>& q_proj() const { return q_proj_; }
  const std::shared_ptr<Linear>& k_proj() const { return k_proj_; }
  const std::shared_ptr<Linear>& v_proj() const { return v_proj_; }
  const std::shared_ptr<Linear>& o_proj() const { return o_proj_; }
  // Replaces the attention core (null restores the default above).
  void set_kernel(AttentionKernel kernel) { kernel_ = std::move(kernel); }

 protected:
  // {x [B, T, hidden], cos [B, T, D], sin [B, T, D][, document_ids [B, T]]}
  // -> {[B, T, hidden]}. Under tensor/sequence parallelism only x is
  // redistributed (it arrives all-gathered over the sequence); cos, sin and
  // document_ids always cover the whole sequence.
  Tensors forward(const Tensors& inputs) override;

 private:
  AttentionOptions options_;
  std::shared_ptr<Linear> q_proj_, k_proj_, v_proj_, o_proj_;
  std::shared_ptr<RMSNorm> q_norm_, k_norm_;
  // The default core (no kernel_ installed) on rows with at most a mask's
  // worth of document ids: the library's or the tiled kernel, as above.
  at::Tensor core(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                  const at::Tensor& document_ids) const;
  // Whether rows with these documents (their runs read on the host, or
  // document ids at all) and this module's window go to the library's
  // variable-length kernel in one call (nn/varlen_attention.h).
  bool takes_varlen(const at::Tensor& q, bool host_runs, bool has_document_ids) const;

  AttentionKernel kernel_;  // null: the default above
};

}  // namespace tessel::nn
