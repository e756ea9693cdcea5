#include "policy/reference_policy.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "fsdp/state_dict.h"
#include "policy/logprobs.h"

namespace tessel::policy {

namespace {

constexpr const char* kKind = "reference";
constexpr int64_t kSwapBlock = int64_t{1} << 18;  // elements per block of the swap (1 MiB of fp32)

// a <-> b in place, a block at a time through `buffer`.
void swap_values(const at::Tensor& a, const at::Tensor& b, at::Tensor& buffer) {
  TESSEL_CHECK(a.is_contiguous() && b.is_contiguous() && a.numel() == b.numel(),
               "reference policy: a shard and its copy must be contiguous and of one size");
  const at::Tensor fa = a.view({-1}), fb = b.view({-1});
  for (int64_t begin = 0; begin < fa.numel(); begin += kSwapBlock) {
    const int64_t len = std::min(kSwapBlock, fa.numel() - begin);
    at::Tensor tmp = buffer.narrow(0, 0, len);
    tmp.copy_(fa.narrow(0, begin, len));
    fa.narrow(0, begin, len).copy_(fb.narrow(0, begin, len));
    fb.narrow(0, begin, len).copy_(tmp);
  }
}

}  // namespace

ReferencePolicy::ReferencePolicy(train::ShardedModel& model) {
  at::NoGradGuard no_grad;
  auto& copies = sets_[kKind];
  std::map<const void*, at::Tensor> made;  // a tied parameter is one tensor under two names
  for (const auto& [name, sp] : fsdp::sharded_state_dict(*model.model)) {
    const void* key = sp.local.data_ptr();
    auto it = made.find(key);
    if (it == made.end()) {
      it = made.emplace(key, sp.local.detach().clone(at::MemoryFormat::Contiguous)).first;
      bytes_ += it->second.numel() * static_cast<int64_t>(it->second.element_size());
    }
    copies[name] = it->second;
  }
}

void ReferencePolicy::swap(train::ShardedModel& model, const dist::DeviceMesh& mesh) {
  at::NoGradGuard no_grad;
  mesh.world()->barrier();
  train::reshard_everything(model);
  auto& copies = sets_.at(kKind);
  at::Tensor buffer;
  std::set<const void*> done;
  for (const auto& [name, sp] : fsdp::sharded_state_dict(*model.model)) {
    if (!done.insert(sp.local.data_ptr()).second) continue;
    const at::Tensor& copy = copies.at(name);
    if (!buffer.defined() || buffer.scalar_type() != copy.scalar_type()) buffer = at::empty({kSwapBlock}, copy.options());
    swap_values(sp.local.detach(), copy, buffer);
  }
}

void ReferencePolicy::with_reference_weights(train::ShardedModel& model, const dist::DeviceMesh& mesh,
                                             const std::function<void()>& fn) {
  swap(model, mesh);
  try {
    fn();
  } catch (...) {
    swap(model, mesh);
    throw;
  }
  // The swap reshards first: the groups fn's forward left gathered hold the
  // reference's weights.
  swap(model, mesh);
}

at::Tensor get_reference_policy_logprobs(ReferencePolicy& reference, train::ShardedModel& model,
                                         const dist::DeviceMesh& mesh, const at::Tensor& input_ids,
                                         const at::Tensor& input_lengths, double temperature, bool fused_head) {
  at::Tensor out;
  reference.with_reference_weights(
      model, mesh, [&] { out = get_logprobs(model, mesh, input_ids, input_lengths, temperature, fused_head); });
  return out;
}

}  // namespace tessel::policy
