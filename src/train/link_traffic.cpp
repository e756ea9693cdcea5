#include "train/link_traffic.h"

#include "core/error.h"

namespace tessel::train {

GroupBytes sent_bytes(const dist::DeviceMesh& mesh) {
  GroupBytes out;
  for (const auto& [name, comm] : mesh.communicators()) {
    const dist::CollectiveCounters c = comm->counters();
    NodeBytes& b = out[name];
    for (int k = 0; k < dist::kNumCollectiveKinds; ++k) {
      b.same_node += c.sent_same_node[k];
      b.other_node += c.sent_other_node[k];
    }
  }
  return out;
}

GroupBytes difference(const GroupBytes& after, const GroupBytes& before) {
  GroupBytes out = after;
  for (auto& [name, b] : out) {
    if (const auto it = before.find(name); it != before.end()) {
      b.same_node -= it->second.same_node;
      b.other_node -= it->second.other_node;
    }
  }
  return out;
}

std::vector<int64_t> flatten(const GroupBytes& bytes) {
  std::vector<int64_t> out;
  for (const auto& [name, b] : bytes) {
    out.push_back(b.same_node);
    out.push_back(b.other_node);
  }
  return out;
}

GroupBytes sum_over_ranks(const GroupBytes& layout, const std::vector<int64_t>& flat) {
  const std::size_t per_rank = 2 * layout.size();
  TESSEL_CHECK(per_rank > 0 && flat.size() % per_rank == 0, "sum_over_ranks: {} values for {} groups", flat.size(),
               layout.size());
  GroupBytes out;
  for (const auto& [name, b] : layout) out[name] = NodeBytes{};
  for (std::size_t base = 0; base < flat.size(); base += per_rank) {
    std::size_t i = base;
    for (auto& [name, b] : out) {
      b.same_node += flat[i++];
      b.other_node += flat[i++];
    }
  }
  return out;
}

int64_t total_other_node(const GroupBytes& bytes) {
  int64_t n = 0;
  for (const auto& [name, b] : bytes) n += b.other_node;
  return n;
}

}  // namespace tessel::train
