#include "dist/communicator_base.h"

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
  }
  return "unknown";
}

CommunicatorBase::CommunicatorBase(int rank, std::vector<int> world_ranks,
                                   const std::string& name, std::chrono::milliseconds timeout)
    : rank_(rank),
      world_ranks_(std::move(world_ranks)),
      name_(name == "world" ? name : format_group_name(name, world_ranks_)),
      timeout_ms_(timeout.count()) {
  TESSEL_CHECK(rank_ >= 0 && rank_ < static_cast<int>(world_ranks_.size()),
               "communicator '{}': rank {} outside group of size {}", name_, rank_,
               world_ranks_.size());
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
  }
  return c;
}

void CommunicatorBase::reset_counters() {
  for (int i = 0; i < kNumCollectiveKinds; ++i) {
    calls_[i].store(0, std::memory_order_relaxed);
    bytes_[i].store(0, std::memory_order_relaxed);
  }
}

void CommunicatorBase::record(CollectiveKind kind, int64_t bytes) {
  calls_[static_cast<int>(kind)].fetch_add(1, std::memory_order_relaxed);
  bytes_[static_cast<int>(kind)].fetch_add(bytes, std::memory_order_relaxed);
}

}  // namespace tessel::dist
