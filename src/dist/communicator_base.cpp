#include "dist/communicator_base.h"

#include <algorithm>

#include "core/error.h"
#include "dist/group_name.h"

namespace tessel::dist {

const char* to_string(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::AllToAll: return "all_to_all";
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::Barrier: return "barrier";
    case CollectiveKind::RingShift: return "ring_shift";
  }
  return "unknown";
}

CommunicatorBase::CommunicatorBase(int rank, std::vector<int> world_ranks,
                                   const std::string& name, std::chrono::milliseconds timeout,
                                   std::shared_ptr<const NodeMap> nodes)
    : rank_(rank),
      world_ranks_(std::move(world_ranks)),
      name_(name == "world" ? name : format_group_name(name, world_ranks_)),
      timeout_ms_(timeout.count()),
      nodes_(std::move(nodes)) {
  TESSEL_CHECK(rank_ >= 0 && rank_ < static_cast<int>(world_ranks_.size()),
               "communicator '{}': rank {} outside group of size {}", name_, rank_,
               world_ranks_.size());
  member_on_my_node_.assign(world_ranks_.size(), 1);
  if (nodes_) {
    const int me = world_ranks_[static_cast<std::size_t>(rank_)];
    for (std::size_t r = 0; r < world_ranks_.size(); ++r) {
      member_on_my_node_[r] = nodes_->same_node(me, world_ranks_[r]) ? 1 : 0;
    }
  }
  for (std::size_t r = 0; r < world_ranks_.size(); ++r) {
    if (static_cast<int>(r) == rank_) continue;
    (member_on_my_node_[r] ? peers_same_node_ : peers_other_node_) += 1;
  }
}

void CommunicatorBase::set_timeout(std::chrono::milliseconds timeout) {
  TESSEL_CHECK(timeout.count() > 0,
               "communicator '{}': timeout must be positive, got {} ms; pass e.g. "
               "std::chrono::seconds(300)",
               name_, timeout.count());
  timeout_ms_.store(timeout.count(), std::memory_order_relaxed);
}

CollectiveCounters CommunicatorBase::counters() const {
  CollectiveCounters c;
  for (int i = 0; i < kNumCollectiveKinds; ++i) {
    c.calls[i] = calls_[i].load(std::memory_order_relaxed);
    c.bytes[i] = bytes_[i].load(std::memory_order_relaxed);
    c.sent_same_node[i] = sent_same_node_[i].load(std::memory_order_relaxed);
    c.sent_other_node[i] = sent_other_node_[i].load(std::memory_order_relaxed);
  }
  return c;
}

void CommunicatorBase::reset_counters() {
  for (int i = 0; i < kNumCollectiveKinds; ++i) {
    calls_[i].store(0, std::memory_order_relaxed);
    bytes_[i].store(0, std::memory_order_relaxed);
    sent_same_node_[i].store(0, std::memory_order_relaxed);
    sent_other_node_[i].store(0, std::memory_order_relaxed);
  }
}

void CommunicatorBase::record_sends_to_each_peer(CollectiveKind kind, int64_t bytes) {
  const int k = static_cast<int>(kind);
  sent_same_node_[k].fetch_add(bytes * peers_same_node_, std::memory_order_relaxed);
  sent_other_node_[k].fetch_add(bytes * peers_other_node_, std::memory_order_relaxed);
}

void CommunicatorBase::record_sends(CollectiveKind kind, const std::vector<int64_t>& elements_to_member,
                                    int64_t element_size) {
  TESSEL_CHECK(elements_to_member.size() == world_ranks_.size(), "communicator '{}': {} send sizes for {} members",
               name_, elements_to_member.size(), world_ranks_.size());
  int64_t same = 0, other = 0;
  for (std::size_t r = 0; r < elements_to_member.size(); ++r) {
    if (static_cast<int>(r) == rank_) continue;
    (member_on_my_node_[r] ? same : other) += elements_to_member[r];
  }
  sent_same_node_[static_cast<int>(kind)].fetch_add(same * element_size, std::memory_order_relaxed);
  sent_other_node_[static_cast<int>(kind)].fetch_add(other * element_size, std::memory_order_relaxed);
}

void CommunicatorBase::record_all_reduce_sends(int64_t numel, int64_t element_size) {
  const int64_t group_size = size();
  const int64_t chunk = (numel + group_size - 1) / group_size;
  std::vector<int64_t> lengths(static_cast<size_t>(group_size));
  for (int64_t j = 0; j < group_size; ++j)
    lengths[static_cast<size_t>(j)] = std::clamp<int64_t>(numel - j * chunk, 0, chunk);
  record_sends(CollectiveKind::AllReduce, lengths, element_size);
  record_sends_to_each_peer(CollectiveKind::AllReduce,
                            lengths[static_cast<size_t>(rank_)] * element_size);
}

void CommunicatorBase::record(CollectiveKind kind, int64_t bytes) {
  calls_[static_cast<int>(kind)].fetch_add(1, std::memory_order_relaxed);
  bytes_[static_cast<int>(kind)].fetch_add(bytes, std::memory_order_relaxed);
}

}  // namespace tessel::dist
