// The backend-independent part of a communicator: identity (rank, size, group
// name, member world ranks), the timeout, and the per-kind counters. Backends
// derive from it and call record() once per collective they accept.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "dist/node_map.h"

namespace tessel::dist {

class CommunicatorBase : public Communicator {
 public:
  // `name` is the caller's group name; name() returns it with the member ranks
  // appended (see group_name.h), except for the world group, named "world".
  // `nodes`: where every world rank runs (null: all on one node).
  CommunicatorBase(int rank, std::vector<int> world_ranks, const std::string& name,
                   std::chrono::milliseconds timeout, std::shared_ptr<const NodeMap> nodes = nullptr);

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

  const std::shared_ptr<const NodeMap>& node_map() const { return nodes_; }

 protected:
  void record(CollectiveKind kind, int64_t bytes);
  // Bytes sent by this rank: the same amount to every other member, or
  // elements_to_member[r] elements of `element_size` bytes to group rank r
  // (this rank's own entry is ignored).
  void record_sends_to_each_peer(CollectiveKind kind, int64_t bytes);
  void record_sends(CollectiveKind kind, const std::vector<int64_t>& elements_to_member, int64_t element_size);
  // An all-reduce of `numel` elements counted as tessel's reduce-scatter +
  // all-gather moves them whatever algorithm runs: chunk j (ceil(numel /
  // size) elements, the last ones shorter) to its owner j, then this rank's
  // reduced chunk to everyone.
  void record_all_reduce_sends(int64_t numel, int64_t element_size);

 private:
  int rank_;
  std::vector<int> world_ranks_;
  std::string name_;
  std::atomic<int64_t> timeout_ms_;
  std::atomic<int64_t> calls_[kNumCollectiveKinds] = {};
  std::atomic<int64_t> bytes_[kNumCollectiveKinds] = {};
  std::shared_ptr<const NodeMap> nodes_;
  std::vector<char> member_on_my_node_;  // by group rank
  int64_t peers_same_node_ = 0, peers_other_node_ = 0;
  std::atomic<int64_t> sent_same_node_[kNumCollectiveKinds] = {};
  std::atomic<int64_t> sent_other_node_[kNumCollectiveKinds] = {};
};

}  // namespace tessel::dist
