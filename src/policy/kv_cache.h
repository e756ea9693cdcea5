// The key/value cache of autoregressive decoding (policy/generation.h): each
// attention layer of a decoding model keeps the keys and values of every
// position it has seen, so a new token costs one position's forward instead
// of the whole sequence's.
//
// Slots: a batch's rows share one slot index per forward (the prompt's
// columns first, then one per generated token), but not positions: a
// left-padded row's first real token sits at slot 3 and position 0, a
// right-padded row has empty slots in the middle. So the cache records, per
// row and slot, the token's position and whether it is real, and attention is
// decided by those: a real query at position p sees the real keys at
// positions <= p (and > p - window on a sliding-window layer). A padding
// query sees only itself, so its (unused) output stays finite and a finite
// value sits in its slot; real queries give it weight exactly 0.
//
// The cache is installed as each Attention module's kernel
// (nn::Attention::set_kernel): the module computes q, k and v for the new
// positions as always (projections, q/k norms, rotary at the positions given
// to the model), the kernel writes k and v into the layer's slots and attends
// over all filled slots. Under tensor parallelism the module holds this
// rank's heads, and so does its cache. Grouped-query attention reads each
// key/value head once for its group of query heads; nothing is repeated.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "models/causal_lm.h"

namespace tessel::policy {

// The attention of queries [B, Hq, Tq, D] over cached keys and values
// [B, Hkv, L, D] (Hkv divides Hq; query head h reads kv head h / (Hq / Hkv)),
// with visible [B, Tq, L] bool. Softmax in float32 (float64 for float64
// inputs), as nn::causal_attention. Returns [B, Hq, Tq, D].
at::Tensor cached_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& visible,
                            double scale, std::optional<double> logit_softcap);

class KvCache {
 public:
  // Room for `capacity` slots of `rows` rows; each layer's tensors are made
  // at its first forward, in the dtype and on the device of its keys.
  KvCache(int64_t rows, int64_t capacity);

  // Installs the cache as the kernel of every attention layer of `model` (a
  // decoding copy: the kernels stay installed, bound to this cache).
  static std::shared_ptr<KvCache> install(models::CausalLM& model, int64_t rows, int64_t capacity);

  // Before a forward of `tokens` new slots per row: their positions [B, T]
  // (int64) and which are real [B, T] (bool). The forward's attention layers
  // then write slots [filled(), filled() + T).
  void begin_forward(const at::Tensor& positions, const at::Tensor& real);
  // After the forward: the new slots count as filled.
  void end_forward();

  int64_t filled() const { return filled_; }
  int64_t capacity() const { return capacity_; }
  // Bytes of every layer's keys and values made so far.
  int64_t bytes() const;

  // The kernel body of one attention layer (nn::AttentionKernel's arguments).
  at::Tensor attend(std::size_t layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                    std::optional<int64_t> sliding_window, std::optional<double> logit_softcap);

 private:
  // [B, T, filled + T] bool: which slots the new queries see.
  const at::Tensor& visible(std::optional<int64_t> sliding_window);

  int64_t rows_, capacity_;
  int64_t filled_ = 0, step_ = 0;  // slots filled before this forward, and its new ones
  at::Tensor positions_;           // [B, capacity] int64
  at::Tensor real_;                // [B, capacity] bool
  std::vector<at::Tensor> keys_, values_;                   // per layer [B, Hkv, capacity, D]
  std::map<int64_t, at::Tensor> visible_by_window_;         // this forward's masks; key 0: no window
};

}  // namespace tessel::policy
