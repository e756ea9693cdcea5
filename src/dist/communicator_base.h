// The backend-independent part of a communicator: identity (rank, size, group
// name, member world ranks), the timeout, and the per-kind counters. Backends
// derive from it and call record() once per collective they accept.
#pragma once

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "dist/communicator.h"

namespace tessel::dist {

class CommunicatorBase : public Communicator {
 public:
  // `name` is the caller's group name; name() returns it with the member ranks
  // appended (see group_name.h), except for the world group, named "world".
  CommunicatorBase(int rank, std::vector<int> world_ranks, const std::string& name,
                   std::chrono::milliseconds timeout);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(world_ranks_.size()); }
  const std::string& name() const override { return name_; }
  const std::vector<int>& world_ranks() const override { return world_ranks_; }

  std::chrono::milliseconds timeout() const override {
    return std::chrono::milliseconds(timeout_ms_.load(std::memory_order_relaxed));
  }
  void set_timeout(std::chrono::milliseconds timeout) override;

  CollectiveCounters counters() const override;
  void reset_counters() override;

 protected:
  void record(CollectiveKind kind, int64_t bytes);

 private:
  int rank_;
  std::vector<int> world_ranks_;
  std::string name_;
  std::atomic<int64_t> timeout_ms_;
  std::atomic<int64_t> calls_[kNumCollectiveKinds] = {};
  std::atomic<int64_t> bytes_[kNumCollectiveKinds] = {};
};

}  // namespace tessel::dist
