#include "fsdp/fsdp_api.h"

#include "core/error.h"

namespace tessel::fsdp {

FSDPMesh::FSDPMesh(dist::CommunicatorPtr shard, dist::CommunicatorPtr replicate, c10::Device device)
    : shard_(std::move(shard)), replicate_(std::move(replicate)), device_(device) {
  TESSEL_CHECK(shard_ != nullptr,
               "FSDPMesh needs a shard group (e.g. mesh.group(\"dp_shard_cp\"))");
}

int64_t FSDPMesh::gradient_divide_factor() const {
  if (divide_factor_ > 0) return divide_factor_;
  return static_cast<int64_t>(shard_size()) * replicate_size();
}

void FSDPMesh::set_gradient_divide_factor(int64_t factor) {
  TESSEL_CHECK(factor >= 1, "gradient divide factor must be >= 1, got {}", factor);
  divide_factor_ = factor;
}

dist::CommunicatorPtr FSDPMesh::post_forward_group(int k) const {
  TESSEL_CHECK(shard_ != nullptr, "FSDPMesh has no shard group");
  const int world = shard_->size();
  if (k < 1 || world % k != 0) {
    throw UsageError(fmt::format(
        "reshard_after_forward = {} must divide the shard group size {} (group {}); use a "
        "divisor such as the ranks per node, true or false",
        k, world, shard_->name()));
  }
  std::lock_guard<std::mutex> lock(cache_->mutex);
  auto it = cache_->post_forward.find(k);
  if (it != cache_->post_forward.end()) return it->second;
  const int r = shard_->rank();
  auto group = shard_->split(r / k, r % k, fmt::format("fsdp_post_forward_{}", k));
  cache_->post_forward.emplace(k, group);
  return group;
}

}  // namespace tessel::fsdp
