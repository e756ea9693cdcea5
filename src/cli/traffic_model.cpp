#include "cli/traffic_model.h"

#include <algorithm>
#include <map>

#include "cli/expert_traffic.h"
#include "core/error.h"

namespace tessel::cli {

namespace {

// The FSDP group a parameter belongs to besides the root: its decoder layer
// ("model.layers.3"), or the untied head ("lm_head"); "" for the root.
std::string layer_of(const std::string& name) {
  if (name.rfind("lm_head.", 0) == 0) return "lm_head";
  const std::string marker = "layers.";
  const auto at = name.find(marker);
  if (at == std::string::npos) return "";
  const auto end = name.find('.', at + marker.size());
  return end == std::string::npos ? "" : name.substr(0, end);
}

// World ranks of `rank`'s group of that name, by rank in group.
std::vector<int> members(const dist::MeshLayout& layout, const std::string& group, int rank) {
  std::vector<int> out(static_cast<std::size_t>(layout.size(group)), -1);
  const int index = layout.group_index(group, rank);
  for (int q = 0; q < layout.world_size(); ++q) {
    if (layout.group_index(group, q) == index) out[static_cast<std::size_t>(layout.rank_in_group(group, q))] = q;
  }
  return out;
}

struct Sender {
  const TrafficInputs& in;
  train::GroupBytes& out;
  std::vector<train::NodeBytes>* per_rank;
  int node(int rank) const { return rank / in.ranks_per_node; }

  void add(const std::string& group, int from, int to, int64_t bytes) {
    if (from == to || bytes == 0) return;
    const bool same = node(from) == node(to);
    auto& b = out[group];
    (same ? b.same_node : b.other_node) += bytes;
    if (per_rank) {
      auto& r = (*per_rank)[static_cast<std::size_t>(from)];
      (same ? r.same_node : r.other_node) += bytes;
    }
  }
  int successor(const std::vector<int>& group_ranks, const std::string& group, int rank) const {
    const auto n = static_cast<int>(group_ranks.size());
    return group_ranks[static_cast<std::size_t>((in.layout->rank_in_group(group, rank) + 1) % n)];
  }
  // All-gather (or reduce-scatter) of `bytes` per rank's part, `times` times.
  void to_each_peer(const std::string& group, int rank, int64_t bytes, int64_t times) {
    const auto group_ranks = members(*in.layout, group, rank);
    if (in.algorithm == CollectiveAlgorithm::Ring) {
      const auto n = static_cast<int64_t>(group_ranks.size());
      add(group, rank, successor(group_ranks, group, rank), (n - 1) * bytes * times);
      return;
    }
    for (int peer : group_ranks) add(group, rank, peer, bytes * times);
  }
  // All-reduce of `numel` elements of `element_size` bytes, `times` times:
  // chunk j to rank j, then this rank's reduced chunk to every peer.
  void all_reduce(const std::string& group, int rank, int64_t numel, int64_t element_size, int64_t times = 1) {
    const auto group_ranks = members(*in.layout, group, rank);
    const auto n = static_cast<int64_t>(group_ranks.size());
    if (n < 2) return;
    if (in.algorithm == CollectiveAlgorithm::Ring) {
      add(group, rank, successor(group_ranks, group, rank),
          2 * (n - 1) * ((numel + n - 1) / n) * element_size * times);
      return;
    }
    const int64_t chunk = (numel + n - 1) / n;
    auto length = [&](int64_t j) { return std::clamp<int64_t>(numel - j * chunk, 0, chunk); };
    const int64_t mine = length(in.layout->rank_in_group(group, rank));
    for (int64_t j = 0; j < n; ++j) {
      add(group, rank, group_ranks[static_cast<std::size_t>(j)], (length(j) + mine) * element_size * times);
    }
  }
};

}  // namespace

std::vector<FsdpGroupShard> fsdp_group_shards(const std::vector<NamedShape>& shapes, int shard_size) {
  std::vector<FsdpGroupShard> layers;
  FsdpGroupShard root{"root", 0, true};
  std::map<std::string, std::size_t> index;
  for (const auto& p : shapes) {
    const int64_t dim0 = p.shape.empty() ? 1 : p.shape[0];
    int64_t row = 1;
    for (std::size_t i = 1; i < p.shape.size(); ++i) row *= p.shape[i];
    const int64_t padded = (dim0 + shard_size - 1) / shard_size * row * 4;  // fp32, rows padded to equal shards
    const std::string layer = layer_of(p.name);
    FsdpGroupShard* g = &root;
    if (!layer.empty()) {
      auto [it, added] = index.emplace(layer, layers.size());
      if (added) layers.push_back(FsdpGroupShard{layer, 0, false});
      g = &layers[it->second];
    }
    g->shard_bytes += padded;
  }
  layers.push_back(root);
  return layers;
}

ExpertSplitGroups expert_split_groups(const std::vector<NamedShape>& shapes, int shard_size, int64_t num_experts,
                                      int ep, int ep_rank, int ep_shard_size) {
  TESSEL_CHECK(ep >= 1 && num_experts % ep == 0, "{} experts do not split over ep {}", num_experts, ep);
  const int64_t local = num_experts / ep, first = ep_rank * local;
  std::vector<NamedShape> dense;
  std::map<std::string, std::vector<NamedShape>> by_expert;  // "model.layers.3.mlp.experts.5" -> its parameters
  for (const auto& p : shapes) {
    const int64_t e = expert_of(p.name);
    if (e < 0) {
      dense.push_back(p);
    } else if (e >= first && e < first + local) {
      const std::string marker = ".experts.";
      const auto index_end = p.name.find('.', p.name.find(marker) + marker.size());
      by_expert[p.name.substr(0, index_end)].push_back(p);
    }
  }
  ExpertSplitGroups out;
  out.dense = fsdp_group_shards(dense, shard_size);
  for (const auto& [name, params] : by_expert) {
    FsdpGroupShard g{name, 0, false};
    for (const auto& f : fsdp_group_shards(params, ep_shard_size)) g.shard_bytes += f.shard_bytes;
    out.experts.push_back(g);
  }
  return out;
}

train::GroupBytes predict_step_traffic(const TrafficInputs& in, std::vector<train::NodeBytes>* per_rank,
                                       std::vector<train::NodeBytes>* per_rank_tp) {
  TESSEL_CHECK(in.layout != nullptr && in.ranks_per_node >= 1 && in.micro_batches >= 1,
               "predict_step_traffic: incomplete inputs");
  const dist::MeshLayout& layout = *in.layout;
  train::GroupBytes out;
  if (per_rank) per_rank->assign(static_cast<std::size_t>(layout.world_size()), train::NodeBytes{});
  Sender send{in, out, per_rank};
  if (per_rank_tp) per_rank_tp->assign(static_cast<std::size_t>(layout.world_size()), train::NodeBytes{});
  Sender send_tp{in, out, per_rank_tp};
  const bool tensor_parallel = layout.size("tp") > 1;
  const int shard_size = layout.size("dp_shard_cp");
  const bool hybrid = layout.size("dp_replicate") > 1;
  const int64_t rs_times = in.reduce_scatter_each_micro_batch ? in.micro_batches : 1;
  const int ep = layout.ep();
  std::vector<std::vector<FsdpGroupShard>> groups_of_tp_rank;  // ranks of one tp coordinate hold the same shards
  for (const auto& shapes : in.tp_views) groups_of_tp_rank.push_back(fsdp_group_shards(shapes, shard_size));
  std::vector<ExpertSplitGroups> groups_of_ep_rank;  // under expert parallelism (tp is 1 then)
  if (ep > 1) {
    TESSEL_CHECK(in.tp_views.size() == 1, "predict_step_traffic: expert parallelism with tp {}", in.tp_views.size());
    for (int e = 0; e < ep; ++e) {
      groups_of_ep_rank.push_back(
          expert_split_groups(in.tp_views.front(), shard_size, in.num_experts, ep, e, layout.ep_shard()));
    }
  }
  const int64_t gathers_resharded = in.micro_batches * (in.reshard_after_forward ? 2 : 1);
  for (int rank = 0; rank < layout.world_size(); ++rank) {
    const int tp_rank = layout.rank_in_group("tp", rank);
    const ExpertSplitGroups* split =
        ep > 1 ? &groups_of_ep_rank.at(static_cast<std::size_t>(layout.rank_in_group("ep", rank))) : nullptr;
    for (const auto& g : split ? split->dense : groups_of_tp_rank.at(static_cast<std::size_t>(tp_rank))) {
      // The root and the head stay gathered from forward to backward.
      const bool kept = g.root || g.name == "lm_head" || !in.reshard_after_forward;
      const int64_t gathers = in.micro_batches * (kept ? 1 : 2);
      if (shard_size > 1) {
        send.to_each_peer("dp_shard_cp", rank, g.shard_bytes / 4 * in.gather_element_bytes, gathers);
        send.to_each_peer("dp_shard_cp", rank, g.shard_bytes, rs_times);
      }
      if (hybrid) send.all_reduce("dp_replicate", rank, g.shard_bytes / 4, 4);
    }
    // The gradient norm: one fp64 sum per set (tp-sharded tensors, the
    // rest) over the shard group.
    send.all_reduce("dp_shard_cp", rank, 1, 8);
    send.all_reduce("dp_shard_cp", rank, 1, 8);
    if (tensor_parallel) {
      send_tp.all_reduce("tp", rank, 1, 8);  // the tp-sharded set's sum, over tp too
      for (const auto& a : in.tp_collectives.all_reduces) {
        send_tp.all_reduce("tp", rank, a.numel, a.element_size, in.micro_batches);
      }
      for (const auto& e : in.tp_collectives.to_each_peer) send_tp.to_each_peer("tp", rank, e.bytes, in.micro_batches);
    }
    if (split == nullptr) continue;
    for (const auto& g : split->experts) {
      if (layout.ep_shard() > 1) {
        send.to_each_peer("ep_shard", rank, g.shard_bytes / 4 * in.gather_element_bytes, gathers_resharded);
        send.to_each_peer("ep_shard", rank, g.shard_bytes, rs_times);
      }
    }
    // The experts' norm set: over ep_shard, then ep; the tokens: an equal
    // share to each ep peer.
    send.all_reduce("ep_shard", rank, 1, 8);
    send.all_reduce("ep", rank, 1, 8);
    const auto peers = members(layout, "ep", rank);
    for (int peer : peers) send.add("ep", rank, peer, in.expert_exchange_bytes_per_rank / (ep - 1));
  }
  return out;
}

}  // namespace tessel::cli
