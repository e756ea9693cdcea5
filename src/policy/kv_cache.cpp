#include "policy/kv_cache.h"

#include <ATen/ATen.h>

#include <limits>

#include "core/error.h"
#include "nn/attention.h"
#include "nn/format.h"

namespace tessel::policy {

at::Tensor cached_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& visible,
                            double scale, std::optional<double> logit_softcap) {
  TESSEL_CHECK(q.dim() == 4 && k.dim() == 4 && v.sizes() == k.sizes(),
               "cached_attention: q {} k {} v {}: expected [B, heads, T, D] and equal k, v", nn::shape_string(q.sizes()),
               nn::shape_string(k.sizes()), nn::shape_string(v.sizes()));
  const int64_t B = q.size(0), Hq = q.size(1), T = q.size(2), D = q.size(3), Hkv = k.size(1), L = k.size(2);
  TESSEL_CHECK(Hkv > 0 && Hq % Hkv == 0, "{} query heads are not a multiple of {} kv heads", Hq, Hkv);
  TESSEL_CHECK(visible.sizes() == at::IntArrayRef({B, T, L}), "cached_attention: visible is {}, expected [{}, {}, {}]",
               nn::shape_string(visible.sizes()), B, T, L);
  const int64_t group = Hq / Hkv;
  // The group's query heads folded into the rows: one product per kv head.
  const at::Tensor qg = q.reshape({B, Hkv, group * T, D});
  at::Tensor scores = at::matmul(qg, k.transpose(-1, -2)).mul(scale);  // [B, Hkv, group*T, L]
  if (logit_softcap) scores = at::tanh(scores / *logit_softcap) * *logit_softcap;
  scores = scores.view({B, Hkv, group, T, L})
               .masked_fill(visible.logical_not().view({B, 1, 1, T, L}), -std::numeric_limits<double>::infinity());
  const at::ScalarType softmax_dtype = at::promote_types(q.scalar_type(), at::kFloat);
  const at::Tensor probs = at::softmax(scores, -1, softmax_dtype).to(q.scalar_type());
  return at::matmul(probs.view({B, Hkv, group * T, L}), v).view({B, Hq, T, D});
}

KvCache::KvCache(int64_t rows, int64_t capacity) : rows_(rows), capacity_(capacity) {
  TESSEL_CHECK(rows > 0 && capacity > 0, "a KV cache needs rows ({}) and slots ({})", rows, capacity);
}

std::shared_ptr<KvCache> KvCache::install(models::CausalLM& model, int64_t rows, int64_t capacity) {
  auto cache = std::make_shared<KvCache>(rows, capacity);
  std::size_t layer = 0;
  for (const auto& [path, module] : nn::named_tessel_modules(model)) {
    auto* attention = dynamic_cast<nn::Attention*>(module);
    if (attention == nullptr) continue;
    // A weak reference: the model outlives no cache it holds a kernel of,
    // and a kernel called after its cache is gone is a bug worth a message.
    std::weak_ptr<KvCache> weak = cache;
    attention->set_kernel([weak, layer, path = path](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                     double scale, std::optional<int64_t> window,
                                                     std::optional<double> softcap, const at::Tensor&) {
      auto live = weak.lock();
      TESSEL_CHECK(live != nullptr, "attention {} of a decoding model ran after its KV cache was freed", path);
      return live->attend(layer, q, k, v, scale, window, softcap);
    });
    ++layer;
  }
  cache->keys_.resize(layer);
  cache->values_.resize(layer);
  return cache;
}

void KvCache::begin_forward(const at::Tensor& positions, const at::Tensor& real) {
  TESSEL_CHECK(positions.dim() == 2 && positions.size(0) == rows_ && real.sizes() == positions.sizes(),
               "KV cache of {} rows: positions {} and real {} must both be [{}, T]", rows_,
               nn::shape_string(positions.sizes()), nn::shape_string(real.sizes()), rows_);
  const int64_t T = positions.size(1);
  TESSEL_CHECK(filled_ + T <= capacity_, "KV cache full: {} slots filled, {} more do not fit in {}", filled_, T,
               capacity_);
  if (!positions_.defined()) {
    positions_ = at::zeros({rows_, capacity_}, positions.options().dtype(at::kLong));
    real_ = at::zeros({rows_, capacity_}, positions.options().dtype(at::kBool));
  }
  positions_.narrow(1, filled_, T).copy_(positions);
  real_.narrow(1, filled_, T).copy_(real);
  step_ = T;
  visible_by_window_.clear();
}

void KvCache::end_forward() {
  filled_ += step_;
  step_ = 0;
  visible_by_window_.clear();
}

int64_t KvCache::bytes() const {
  int64_t total = 0;
  for (const auto* set : {&keys_, &values_}) {
    for (const auto& t : *set) {
      if (t.defined()) total += t.numel() * static_cast<int64_t>(t.element_size());
    }
  }
  return total;
}

const at::Tensor& KvCache::visible(std::optional<int64_t> sliding_window) {
  const int64_t key = sliding_window.value_or(0);
  auto it = visible_by_window_.find(key);
  if (it != visible_by_window_.end()) return it->second;
  const int64_t L = filled_ + step_;
  const at::Tensor key_pos = positions_.narrow(1, 0, L).unsqueeze(1);  // [B, 1, L]
  const at::Tensor key_real = real_.narrow(1, 0, L).unsqueeze(1);
  const at::Tensor query_pos = positions_.narrow(1, filled_, step_).unsqueeze(2);  // [B, T, 1]
  const at::Tensor query_real = real_.narrow(1, filled_, step_).unsqueeze(2);
  const auto idx = at::TensorOptions().dtype(at::kLong).device(positions_.device());
  const at::Tensor key_slot = at::arange(L, idx).view({1, 1, L});
  const at::Tensor query_slot = at::arange(filled_, filled_ + step_, idx).view({1, step_, 1});
  at::Tensor seen = key_real & query_real & key_slot.le(query_slot) & key_pos.le(query_pos);
  if (sliding_window) seen = seen & (query_pos - key_pos).lt(*sliding_window);
  seen = seen | key_slot.eq(query_slot);  // every query sees its own slot (a padding one only that)
  return visible_by_window_.emplace(key, seen).first->second;
}

at::Tensor KvCache::attend(std::size_t layer, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           double scale, std::optional<int64_t> sliding_window, std::optional<double> logit_softcap) {
  TESSEL_CHECK(layer < keys_.size(), "KV cache: layer {} of {}", layer, keys_.size());
  TESSEL_CHECK(step_ > 0 && k.size(2) == step_ && k.size(0) == rows_,
               "KV cache: attention got keys {} but the forward announced {} rows x {} new slots",
               nn::shape_string(k.sizes()), rows_, step_);
  at::Tensor& keys = keys_[layer];
  at::Tensor& values = values_[layer];
  if (!keys.defined()) {
    keys = at::empty({rows_, k.size(1), capacity_, k.size(3)}, k.options());
    values = at::empty({rows_, v.size(1), capacity_, v.size(3)}, v.options());
  }
  keys.narrow(2, filled_, step_).copy_(k);
  values.narrow(2, filled_, step_).copy_(v);
  const int64_t L = filled_ + step_;
  return cached_attention(q, keys.narrow(2, 0, L), values.narrow(2, 0, L), visible(sliding_window), scale,
                          logit_softcap);
}

}  // namespace tessel::policy
