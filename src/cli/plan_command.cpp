// `tessel plan [CONFIG] [OVERRIDES...] [--world N] [--json] [--verbose]`: a
// dry run of the layout a training run would use. It validates the device
// mesh for N processes, resolves the tensor-parallel plan (custom > optimized
// > HF, SPEC 3), prints the modules the plan touches with their styles (the
// same module of every layer on one line, layer_groups.h; --verbose: one line
// per module), and the parameter bytes every rank would hold once tensor
// parallelism and FSDP have split the model. The model is built on the meta
// device and the plan is applied once per tp rank over a shape-only group
// (plan_layout.h), so this costs no memory and launches no processes, for
// models of any size.
// Every problem (mesh, plan, pattern matching nothing, unknown style, heads
// not divisible by tp) exits with 2.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/context_split.h"
#include "cli/default_config.h"
#include "cli/expert_traffic.h"
#include "cli/layer_groups.h"
#include "cli/machine_probe.h"
#include "cli/mesh_sizes_from_config.h"
#include "cli/plan_layout.h"
#include "parallel/expert_parallel_check.h"
#include "cli/step_prediction.h"
#include "cli/traffic_model.h"
#include "config/loader.h"
#include "config/parallelism_config.h"
#include "core/error.h"
#include "dist/core_sharing.h"
#include "dist/mesh_layout.h"
#include "dist/shared_memory_copy.h"
#include "models/model_config.h"
#include "models/presets.h"
#include "models/registry.h"
#include "parallel/parallelize.h"
#include "parallel/resolve.h"
#include "tensor/chunking.h"
#include "train/train_options.h"

namespace tessel::cli {

namespace {

struct PlanArgs {
  std::vector<std::string> positional;
  int64_t world = 0;  // 0: cluster.num_nodes * cluster.gpus_per_node
  bool json = false;
  bool verbose = false;  // one line per module instead of one per group of layers
  // --predict and the cluster it describes (0: measured on this machine).
  bool predict = false;
  double inter_gbit_s = 0, intra_gbit_s = 0, latency_us = -1, gflops = 0;
  double core_share = 0;  // of one core per rank; 0: ranks_per_node over this machine's cores
  double memory_per_rank_gib = 0;  // what a rank may hold (0: no limit), for the tp recommendation
  double inter_cpu_ns_per_byte = 0;  // a byte sent to another node, both ends' CPU (0: from the TCP loopback rate)
  std::string collectives = "direct";
};

models::ModelConfig model_config_of(const std::string& name) {
  if (std::filesystem::is_directory(name)) return models::load_model_config(name);
  return models::parse_model_config(models::make_preset_config(name), "preset " + name);
}

struct RankBytes {
  int64_t elements = 0;       // this rank's share of the parameters
  int64_t padded_bytes = 0;   // fp32 bytes FSDP allocates for them (dim 0 padded to equal shards)
};

// FSDP chunks dim 0 of each tp-local tensor over the shard group like
// torch.chunk and pads every rank's chunk to ceil(dim0 / shard_size) rows
// (fsdp_group_shards).
RankBytes fsdp_share(const std::vector<NamedShape>& shapes, int shard_size, int shard_rank) {
  RankBytes b;
  for (const auto& p : shapes) {
    const int64_t dim0 = p.shape.empty() ? 1 : p.shape[0];
    int64_t row = 1;
    for (size_t i = 1; i < p.shape.size(); ++i) row *= p.shape[i];
    b.elements += tensor::chunk_size(dim0, shard_size, shard_rank) * row;
  }
  for (const auto& g : fsdp_group_shards(shapes, shard_size)) b.padded_bytes += g.shard_bytes;
  return b;
}

// The share of a core each rank gets when the compute is timed here: as
// given, else this machine's cores over the ranks of a node, at most 1.
double core_share(const PlanArgs& args, int ranks_per_node) {
  if (args.core_share > 0) return args.core_share;
  return std::min(1.0, static_cast<double>(dist::usable_cores()) / ranks_per_node);
}

// The cluster --predict describes: nodes and ranks per node from the config
// (cluster.num_nodes; the world split evenly over them), rates as given or
// measured on this machine; where compute is timed here (no --gflops), the
// transport's CPU cost on this machine.
ClusterDescription describe_cluster(const PlanArgs& args, const config::ParallelismConfig& par, int world) {
  ClusterDescription c;
  c.nodes = static_cast<int>(par.num_nodes);
  if (c.nodes < 1 || world % c.nodes != 0) {
    throw UsageError(fmt::format("--predict: {} ranks do not split evenly over cluster.num_nodes={}; set "
                                 "cluster.num_nodes and cluster.gpus_per_node (or --world) to match",
                                 world, par.num_nodes));
  }
  c.ranks_per_node = world / c.nodes;
  c.base_rss_bytes = runtime_rss_bytes();  // before any probe's buffers
  // Each rate measured at most once, only where something needs it.
  std::optional<double> tcp, copy;
  auto tcp_rate = [&] { return tcp ? *tcp : *(tcp = tcp_gbytes_s()); };
  auto copy_rate = [&] { return copy ? *copy : *(copy = copy_gbytes_s()); };
  std::vector<std::string> measured;
  // Measure only what was not given.
  auto given_or = [&](double given, const char* what, auto measure) {
    if (given > 0) return given;
    measured.push_back(what);
    return measure();
  };
  c.gflops = given_or(args.gflops, "compute (GEMM)", gemm_gflops);
  // A shared-memory transfer is one memory copy with CMA, two without (into
  // the segment and out): dist/shared_memory_copy.h, as the ranks will choose.
  c.intra_gbit_s = given_or(args.intra_gbit_s, "intra-node", [&] {
    return copy_rate() * 8 / dist::shared_memory_copies_per_transfer();
  });
  c.inter_gbit_s = given_or(args.inter_gbit_s, "inter-node (TCP loopback)", [&] { return tcp_rate() * 8; });
  c.latency_us = args.latency_us >= 0 ? args.latency_us : 20;
  c.algorithm = args.collectives == "ring" ? CollectiveAlgorithm::Ring : CollectiveAlgorithm::Direct;
  c.source = measured.empty() ? "as given" : "measured on this machine: " + fmt::format("{}", fmt::join(measured, ", "));
  // Where a rank has no core beyond its compute thread's, the kernel's TCP
  // and the shared-memory copies run on the compute's cores: a byte sent
  // across costs the sender's send and the receiver's receive (at most one
  // loopback transfer each), a byte to a peer on the node its copies. Each
  // rank receives about what it sends.
  const double share = core_share(args, c.ranks_per_node);
  // A given share says how much of this machine a rank gets (pretend nodes
  // share its cores); else a node is this machine.
  const double cores_per_rank =
      args.core_share > 0 ? args.core_share : static_cast<double>(dist::usable_cores()) / c.ranks_per_node;
  // The reductions' packing and adding (reduction_copy_bytes) run on the
  // ranks' cores wherever this machine's compute is the model.
  if (args.gflops <= 0) c.memory_copy_s_per_byte = 1 / (copy_rate() * 1e9) / share;
  if (args.gflops <= 0 && (share < 1 || cores_per_rank < 2)) {
    if (args.inter_cpu_ns_per_byte > 0) {
      c.transport_cpu_s_per_inter_byte = args.inter_cpu_ns_per_byte * 1e-9 / share;
    } else if (tcp_rate() > 0) {
      c.transport_cpu_s_per_inter_byte = 2 / (tcp_rate() * 1e9) / share;
    }
    c.transport_cpu_s_per_intra_byte = dist::shared_memory_copies_per_transfer() * c.memory_copy_s_per_byte;
    c.source += fmt::format("; the transport's CPU per byte ({}, memory copy), no core to spare for it, so "
                            "nothing overlaps",
                            args.inter_cpu_ns_per_byte > 0 ? "as given across nodes" : "TCP loopback");
    c.transport_overlaps = false;
  }
  if (args.gflops <= 0 && share < 1) {
    c.caveat = fmt::format(
        "ranks share cores here ({:.2g} of a core each): the prediction leaves out what the scheduler and the "
        "transport's polling take from them; measured up to 32% above it on 2 pretend nodes x 2 ranks on 2 "
        "cores (docs/bench/cluster.md)",
        share);
  }
  return c;
}

void print_prediction(const ClusterDescription& c, const LayoutPrediction& p, const Recommendation& r) {
  auto gb = [](int64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0); };
  std::printf("\nprediction for %d node(s) x %d rank(s): inter-node %.3g Gbit/s per node link, intra-node %.3g "
              "Gbit/s per rank, %.0f us per collective, %s collectives, %.3g GFLOP/s per rank (%s)\n",
              c.nodes, c.ranks_per_node, c.inter_gbit_s, c.intra_gbit_s, c.latency_us,
              c.algorithm == CollectiveAlgorithm::Ring ? "ring" : "direct", c.gflops, c.source.c_str());
  std::printf("  memory per rank (largest): sharded state %.3f GiB, unsharded peak %.3f GiB, activations %.3f GiB;"
              " tensors at their peak %.3f GiB (gradients and activations do not peak together) + runtime and"
              " allocator %.3f GiB = %.3f GiB resident\n",
              gb(p.state_bytes), gb(p.unsharded_peak_bytes), gb(p.activation_bytes), gb(p.tensor_bytes),
              gb(p.rss_bytes - p.tensor_bytes), gb(p.rss_bytes));
  std::printf("  bytes per step (all ranks):\n");
  for (const auto& [group, b] : p.bytes) {
    std::printf("    %-12s same node %10.1f MB   other nodes %10.1f MB\n", group.c_str(),
                static_cast<double>(b.same_node) / 1e6, static_cast<double>(b.other_node) / 1e6);
  }
  std::printf("  step: compute %.3f s (forward %.3f s), transport CPU %.3f s, reductions' packing and adding %.3f s, "
              "optimizer %.3f s, inter-node %.3f s, intra-node %.3f s, latency %.3f s, tensor parallel %.3f s -> "
              "%.3f s without overlap, %.3f s with\n",
              p.compute_s, p.forward_compute_s, p.transport_cpu_s, p.reduction_memory_s, p.optimizer_s, p.inter_s,
              p.intra_s, p.latency_s, p.tp_s, p.step_s_no_overlap, p.step_s_overlap);
  std::printf("  dp_replicate_size:");
  for (const auto& cand : r.candidates) std::printf("  %d -> %.3f s", cand.dp_replicate, cand.step_s_overlap);
  std::printf("\nrecommend %s\n", r.reason.c_str());
}

void run_plan(const PlanArgs& args) {
  const ConfigArgs given = split_config_args(args.positional);
  const std::string path = (given.path.empty() ? default_config_path() : given.path).string();
  const config::Config cfg = config::load_config(path, given.overrides);
  const config::ParallelismConfig par = config::parallelism_from(cfg);
  const int64_t world = args.world > 0 ? args.world : par.world_size();
  const dist::MeshLayout layout(mesh_sizes_from(par, world));
  const std::string model_name = cfg.get<std::string>("policy.model_name");
  const models::ModelConfig model_config = model_config_of(model_name);
  parallel::check_expert_parallel(layout.ep(), model_config);
  const auto dims = layout.dims();
  const int tp = dims[3];
  const int shard_size = dims[1] * dims[2];
  const train::TrainOptions t = train::train_options_from(cfg);
  LayoutInputs inputs;
  try {
    inputs = layout_inputs(layout, par, model_config, t);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());  // a bad plan is the user's input, like a bad config
  }
  if (par.node_shared_params) {
    // The model below is the default's: per-rank all-gathers and transient
    // unsharded layers. Saying so beats a silent wrong figure.
    std::fprintf(stderr,
                 "tessel plan: policy.dtensor_cfg.node_shared_params=true is not modelled: the bytes, memory and "
                 "times below are FSDP's default (all-gathers, unsharded layers per rank); node-shared "
                 "parameters send no all-gathers and hold one copy of the parameters per node instead "
                 "(docs/bench/fsdp_cpu.md)\n");
  }
  const parallel::ResolvedPlan& resolved = inputs.resolved;
  const std::vector<TpRankView>& views = inputs.views;
  const StepShape& step = inputs.step;

  const int64_t model_elements = views.front().model_elements;

  // Under expert parallelism a rank holds the dense parameters' share over
  // dp_shard_cp and its ep group position's experts, sharded over ep_shard.
  const int ep = layout.ep();
  const int64_t experts_per_rank = ep > 1 ? model_config.num_experts / ep : model_config.num_experts;
  nlohmann::json ranks = nlohmann::json::array();
  for (int rank = 0; rank < layout.world_size(); ++rank) {
    const auto c = layout.coordinate(rank);
    const int shard_rank = c[1] * dims[2] + c[2];
    const auto& named = views.at(static_cast<size_t>(c[3])).named;
    // Without expert parallelism every expert is this rank's, sharded like
    // the dense parameters (each parameter's share is its own, so splitting
    // the list changes no sum).
    const int64_t first = ep > 1 ? layout.rank_in_group("ep", rank) * experts_per_rank : 0;
    std::vector<NamedShape> dense, own_experts;
    for (const auto& p : named) {
      const int64_t e = expert_of(p.name);
      if (e < 0) {
        dense.push_back(p);
      } else if (e >= first && e < first + experts_per_rank) {
        own_experts.push_back(p);
      }
    }
    RankBytes b = fsdp_share(dense, shard_size, shard_rank);
    const RankBytes expert = ep > 1 ? fsdp_share(own_experts, layout.ep_shard(), layout.rank_in_group("ep_shard", rank))
                                    : fsdp_share(own_experts, shard_size, shard_rank);
    b.elements += expert.elements;
    b.padded_bytes += expert.padded_bytes;
    ranks.push_back({{"rank", rank},
                     {"ep", layout.rank_in_group("ep", rank)},
                     {"expert_elements", expert.elements},
                     {"dp_replicate", c[0]},
                     {"dp_shard", c[1]},
                     {"cp", c[2]},
                     {"tp", c[3]},
                     {"param_elements", b.elements},
                     {"param_bytes", b.elements * 4},
                     {"padded_param_bytes", b.padded_bytes}});
  }
  const auto& applied = views.front().applied;

  const ContextSplit split = context_split(dims[2], t.max_seq_len);
  const int64_t activations = activation_bytes(model_config, tp, dims[2], step);
  const int64_t activations_cp1 = activation_bytes(model_config, tp, 1, step);

  // Mixture of experts: the experts a rank holds, and (ep > 1) the token
  // exchange per step under uniform routing.
  nlohmann::json experts_json;
  if (models::is_moe(model_config)) {
    int64_t expert_bytes_max = 0;
    for (const auto& r : ranks) expert_bytes_max = std::max(expert_bytes_max, r["expert_elements"].get<int64_t>() * 4);
    const ExpertExchangeEstimate exchange = step_expert_exchange(model_config, ep, step, split.tokens_per_rank);
    experts_json = {{"ep", ep},
                    {"ep_shard", layout.ep_shard()},
                    {"num_experts", model_config.num_experts},
                    {"top_k", model_config.num_experts_per_tok},
                    {"experts_per_rank", experts_per_rank},
                    {"sparse_layers", sparse_layer_count(model_config)},
                    {"expert_bytes_per_rank", expert_bytes_max},
                    {"all_to_all",
                     {{"routing", "uniform (every assignment lands on any expert alike)"},
                      {"forward_calls_per_rank", exchange.forward_calls},
                      {"rows_off_rank_per_rank", exchange.rows_off_rank},
                      {"bytes_per_rank", exchange.bytes_per_rank},
                      {"bytes_all_ranks", exchange.bytes_per_rank * layout.world_size()}}}};
  }

  std::optional<Recommendation> prediction;
  const std::string tp_traffic_note =
      tp == 1 ? "none (tp 1)"
      : inputs.tp_modelled
          ? "modelled (the optimized plan's activations, loss statistics and whole parameters' gradients)"
          : fmt::format("not modelled for a {} plan: only the optimized plan's are", parallel::to_string(resolved.source));
  ClusterDescription cluster;
  // Every tensor-parallel size that fits inside a node, each with its own
  // dp_replicate recommendation (the configured tp's is `prediction`).
  std::vector<std::pair<int, Recommendation>> by_tp;
  std::vector<std::string> tp_skipped;
  std::optional<TpRecommendation> tp_choice;
  if (args.predict) {
    cluster = describe_cluster(args, par, layout.world_size());
    std::optional<double> optimizer_per_element;  // measured once, the same for every tp
    auto predict_at = [&](const dist::MeshLayout& at, const LayoutInputs& in) {
      ClusterDescription c = cluster;
      const int at_tp = at.size("tp");
      if (args.gflops <= 0) {
        // Time the model's own micro batch here; ranks sharing cores get a share.
        const double share = core_share(args, c.ranks_per_node);
        if (auto timing = measure_micro_batch(model_config, at_tp, t.micro_batch_size, t.max_seq_len)) {
          if (!optimizer_per_element) optimizer_per_element = optimizer_s_per_element();
          c.micro_batch_compute_s = timing->total_s / share;
          c.micro_batch_forward_s = timing->forward_s / share;
          c.optimizer_s_per_element = *optimizer_per_element / share;
          c.source += fmt::format("; compute: this model's micro batch timed here ({:.3f} s on one core, "
                                  "{:.3f} of it forward; {:.2g} of a core per rank), and the optimizer step",
                                  timing->total_s, timing->forward_s, share);
        }
      }
      std::vector<std::vector<NamedShape>> named;
      for (const auto& v : in.views) named.push_back(v.named);
      return std::make_pair(c, recommend(at, named, model_config, c, in.step));
    };
    auto [timed, configured] = predict_at(layout, inputs);
    cluster = timed;
    prediction = configured;
    if (layout.ep() == 1) {
      for (int candidate = 1; candidate <= cluster.ranks_per_node; ++candidate) {
        if (cluster.ranks_per_node % candidate != 0) continue;
        if (candidate == tp) {
          by_tp.emplace_back(tp, *prediction);
          continue;
        }
        dist::MeshSizes sizes = mesh_sizes_from(par, world);
        sizes.tp = candidate;
        sizes.dp_replicate = 1;
        try {
          const dist::MeshLayout at(sizes);
          const LayoutInputs in = layout_inputs(at, par, model_config, t);
          if (!in.tp_modelled) throw Error("its plan's tensor-parallel collectives are not modelled");
          by_tp.emplace_back(candidate, predict_at(at, in).second);
        } catch (const Error& e) {
          tp_skipped.push_back(fmt::format("tp {}: {}", candidate, e.what()));
        }
      }
      const int64_t limit = static_cast<int64_t>(args.memory_per_rank_gib * (1 << 30));
      if (by_tp.size() > 1 || limit > 0) tp_choice = recommend_tp(by_tp, limit);
    }
  }
  // The prediction for this run's own dp_replicate_size.
  const auto this_layout = [&]() -> const LayoutPrediction& {
    for (const auto& c : prediction->candidates) {
      if (c.dp_replicate == dims[0]) return c;
    }
    return prediction->candidates.front();
  };

  if (args.json) {
    nlohmann::json out;
    out["config"] = path;
    out["model"] = model_name;
    out["architecture"] = model_config.architecture;
    out["world_size"] = layout.world_size();
    out["mesh"] = {{"dp_replicate", dims[0]}, {"dp_shard", dims[1]}, {"cp", dims[2]}, {"tp", dims[3]},
                   {"describe", layout.describe()}};
    out["plan"] = {{"source", parallel::to_string(resolved.source)}, {"reason", resolved.log_line}};
    nlohmann::json modules = nlohmann::json::array();
    for (const auto& a : applied) modules.push_back({{"module", a.module_path}, {"style", a.style}, {"pattern", a.pattern}});
    out["modules"] = modules;
    out["model_param_elements"] = model_elements;
    out["model_param_bytes"] = model_elements * 4;
    out["ranks"] = ranks;
    out["context_parallel"] = to_json(split);
    out["activation_bytes_per_rank"] = activations;
    out["activation_bytes_per_rank_cp1"] = activations_cp1;
    if (!experts_json.is_null()) out["experts"] = experts_json;
    if (prediction) {
      nlohmann::json candidates = nlohmann::json::array();
      for (const auto& c : prediction->candidates) candidates.push_back(to_json(c));
      out["prediction"] = {{"cluster",
                            {{"nodes", cluster.nodes},
                             {"ranks_per_node", cluster.ranks_per_node},
                             {"inter_node_gbit_s", cluster.inter_gbit_s},
                             {"intra_node_gbit_s", cluster.intra_gbit_s},
                             {"latency_us", cluster.latency_us},
                             {"collectives", cluster.algorithm == CollectiveAlgorithm::Ring ? "ring" : "direct"},
                             {"gflops_per_rank", cluster.gflops},
                             {"base_rss_bytes", cluster.base_rss_bytes},
                             {"source", cluster.source},
                             {"caveat", cluster.caveat}}},
                           {"this_layout", to_json(this_layout())},
                           {"candidates", candidates},
                           {"recommended_dp_replicate_size", prediction->recommended_dp_replicate},
                           {"recommendation", prediction->reason},
                           {"tp_collectives", tp_traffic_note}};
      if (tp_choice) {
        nlohmann::json tps = nlohmann::json::array();
        for (const auto& [at_tp, r] : by_tp) {
          const LayoutPrediction& best = recommended(r);
          tps.push_back({{"tp", at_tp},
                         {"recommended_dp_replicate_size", r.recommended_dp_replicate},
                         {"step_s_overlap", best.step_s_overlap},
                         {"rss_bytes", best.rss_bytes}});
        }
        out["prediction"]["tp_candidates"] = tps;
        out["prediction"]["tp_skipped"] = tp_skipped;
        out["prediction"]["recommended_tp_size"] = tp_choice->tp;
        out["prediction"]["tp_recommendation"] = tp_choice->reason;
      }
    }
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }

  std::printf("config: %s\nmodel:  %s (%s), %lld parameters\nmesh:   %s\nplan:   %s\n", path.c_str(),
              model_name.c_str(), model_config.architecture.c_str(), static_cast<long long>(model_elements),
              layout.describe().c_str(), parallel::to_string(resolved.source));
  std::printf("%s\n", resolved.log_line.c_str());
  if (!applied.empty()) {
    std::vector<ModuleLine> lines;
    for (const auto& a : applied) lines.push_back({a.module_path, a.style, a.pattern});
    if (!args.verbose) lines = group_layers(lines);
    std::size_t width = 6;
    for (const auto& l : lines) width = std::max(width, l.modules.size());
    std::printf("\n%-*s  %s\n", static_cast<int>(width), "module", "style  [pattern]");
    for (const auto& l : lines) {
      std::printf("%-*s  %s  [%s]\n", static_cast<int>(width), l.modules.c_str(), l.style.c_str(),
                  l.pattern.c_str());
    }
    std::printf("\nmodules not listed keep whole (replicated) parameters on every tp rank\n");
  }
  // Ranks with the same tp and shard coordinates hold the same bytes: one
  // line per distinct pair, listing its ranks.
  // Under expert parallelism the ep position (which experts) and the
  // ep_shard position (which of their rows) tell ranks apart too.
  std::map<std::array<int, 3>, std::vector<int>> same;
  for (const auto& r : ranks) {
    const int rank = r["rank"].get<int>();
    same[{r["tp"].get<int>(), r["dp_shard"].get<int>() * dims[2] + r["cp"].get<int>(),
          ep > 1 ? layout.rank_in_group("ep_shard", rank) * ep + r["ep"].get<int>() : 0}]
        .push_back(rank);
  }
  std::printf("\nparameters per rank (fp32; FSDP pads each rank's shard to equal size):\n");
  for (const auto& [coord, members] : same) {
    const auto& r = ranks[static_cast<size_t>(members.front())];
    const std::string experts =
        experts_json.is_null() ? ""
                               : fmt::format(", of them experts {} bytes{}", r["expert_elements"].get<int64_t>() * 4,
                                             ep > 1 ? fmt::format(" (experts {}..{})", r["ep"].get<int>() * experts_per_rank,
                                                                  (r["ep"].get<int>() + 1) * experts_per_rank - 1)
                                                    : "");
    std::printf("  tp %d, shard %d (ranks %s): %lld parameters, %lld bytes (%lld padded)%s\n", coord[0], coord[1],
                fmt::format("{}", fmt::join(members, ",")).c_str(),
                static_cast<long long>(r["param_elements"].get<int64_t>()),
                static_cast<long long>(r["param_bytes"].get<int64_t>()),
                static_cast<long long>(r["padded_param_bytes"].get<int64_t>()), experts.c_str());
  }
  if (!experts_json.is_null()) {
    const auto& a = experts_json["all_to_all"];
    std::printf("\nexperts: %lld per sparse layer over ep %d (%lld per rank, their rows over %s %d), %lld sparse "
                "layers, top-%lld\n",
                static_cast<long long>(model_config.num_experts), ep, static_cast<long long>(experts_per_rank),
                ep > 1 ? "ep_shard" : "dp_shard_cp", ep > 1 ? layout.ep_shard() : shard_size, static_cast<long long>(experts_json["sparse_layers"].get<int64_t>()),
                static_cast<long long>(model_config.num_experts_per_tok));
    if (ep > 1) {
      std::printf("token exchange per step (all-to-all, estimate for uniform routing): %lld sparse-layer forwards "
                  "per rank, %lld assignments leaving each rank; %.2f MB sent per rank, %.2f MB by all ranks\n",
                  static_cast<long long>(a["forward_calls_per_rank"].get<int64_t>()),
                  static_cast<long long>(a["rows_off_rank_per_rank"].get<int64_t>()),
                  static_cast<double>(a["bytes_per_rank"].get<int64_t>()) / 1e6,
                  static_cast<double>(a["bytes_all_ranks"].get<int64_t>()) / 1e6);
    }
  }
  std::printf("\n%s", describe(split).c_str());
  std::printf("activations per rank (estimate; one micro batch of %lld rows x %lld tokens, saved for backward): "
              "%.2f MiB%s\n",
              static_cast<long long>(step.micro_batch), static_cast<long long>(split.tokens_per_rank),
              static_cast<double>(activations) / (1 << 20),
              split.cp > 1 ? fmt::format(" ({:.2f} MiB at cp 1)", static_cast<double>(activations_cp1) / (1 << 20)).c_str()
                           : "");
  if (step.packed_rows) {
    std::printf("  packed rows: counted as full rows (at most that many tokens), with the attention probabilities "
                "their documents may keep for backward (nn/document_runs.h)\n");
  }
  if (prediction) {
    print_prediction(cluster, this_layout(), *prediction);
    if (tp > 1) std::printf("tensor-parallel collectives: %s\n", tp_traffic_note.c_str());
    for (const auto& skipped : tp_skipped) std::printf("not considered: %s\n", skipped.c_str());
    if (tp_choice) std::printf("recommend %s\n", tp_choice->reason.c_str());
    if (!cluster.caveat.empty()) std::printf("caveat: %s\n", cluster.caveat.c_str());
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Dry run of a run's layout: tessel plan [CONFIG] [overrides...] [--world N] [--json] "
      "[--verbose]. "
      "Validates the mesh, resolves the tensor-parallel plan (custom_parallel_plan, then the "
      "architecture's optimized plan, then the HF plan), and prints each module's style and "
      "every rank's parameter bytes. Problems exit with code 2.");
  cmd->add_option("config_and_overrides", args->positional,
                  "[CONFIG] then overrides: a.b=v (change), +a.b=v (add), ~a.b (delete)");
  cmd->add_option("--world", args->world,
                  "number of processes (default: cluster.num_nodes * cluster.gpus_per_node)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", args->json, "print one JSON object instead of text");
  cmd->add_flag("--verbose", args->verbose,
                "list every module on its own line (default: the same module of consecutive "
                "layers with the same style on one line, e.g. model.layers.{0..15}.mlp.up_proj)");
  cmd->add_flag("--predict", args->predict,
                "predict memory per rank, bytes per step by link class and step time on the cluster that "
                "cluster.num_nodes describes, and recommend dp_replicate_size and tp (rates measured here unless given)");
  cmd->add_option("--inter-node-gbit", args->inter_gbit_s, "--predict: each node link's rate, Gbit/s")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--intra-node-gbit", args->intra_gbit_s, "--predict: a rank's rate to its node's peers, Gbit/s")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--memory-per-rank-gib", args->memory_per_rank_gib,
                  "--predict: what one rank may hold (a device's memory, or a node's over its ranks), GiB; "
                  "tensor-parallel sizes whose largest rank holds more are not recommended")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--inter-node-cpu-ns-per-byte", args->inter_cpu_ns_per_byte,
                  "--predict, timed here: what one byte sent to another node costs the CPU, sender and receiver "
                  "together, in ns, where the transport shares the ranks' cores (default: twice this machine's TCP "
                  "loopback time per byte; scripts/cluster/link_cpu.sh measures a pretend cluster's link)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--latency-us", args->latency_us, "--predict: latency per collective, microseconds (default 20)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--gflops", args->gflops,
                  "--predict: compute rate per rank, GFLOP/s (default: time this model's micro batch here)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--collectives", args->collectives,
                  "--predict: direct (this build's MPI collectives, what its counters count) or ring (a device "
                  "cluster's NCCL rings)")
      ->check(CLI::IsMember({"direct", "ring"}));
  cmd->add_option("--core-share", args->core_share,
                  "--predict, timed here: the share of a core each rank gets (default: this machine's cores over "
                  "ranks per node, at most 1; pretend nodes on one machine share its cores: cores / world)")
      ->check(CLI::Range(0.01, 1.0));
  cmd->callback([args] { run_plan(*args); });
}

}  // namespace tessel::cli
