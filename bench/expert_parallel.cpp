// Expert parallelism's speed, memory and token traffic (issue 14): the real
// trainer (train::train, as `tessel train` runs it) on an MoE model at one
// expert_parallel_size per launch, every rank of the launch in the mesh.
//
// Model: bench/configs/mixtral-115m (Mixtral, hidden 512, 8 layers of 8
// experts of width 1024, top-2, 8/4 heads, vocab 8192: 115.4M parameters,
// 100.7M of them in experts), fp32 weights from models::save_initialized
// (seed 42) written once into --weights-dir.
// Synthetic data, global batch = world x micro batch, fp32, 1 thread per rank.
//
// Printed by rank 0, one JSON line:
//   tokens_per_s_median, step_s_median  over steps 2.. (step 1 warms up);
//   expert_bytes_per_rank               the fp32 expert shards each rank holds
//                                       (the trainer's own tensors: checked
//                                       against `tessel plan`'s closed form);
//   peak_rss_bytes_per_rank             VmHWM after the last step (the OS);
//   all_to_all                          bytes the ep group's all-to-alls sent
//                                       to peers, from the communicators'
//                                       counters, summed over ranks, against
//                                       the closed form of cli/expert_traffic.h
//                                       for the rows the routers actually sent
//                                       (the dispatch's counts) and against
//                                       the uniform-routing estimate of
//                                       `tessel plan`;
//   sent_bytes_per_step_by_group        every mesh group's collective bytes
//                                       per step (the trainer's counters).
// Usage: mpirun -np W bench_expert_parallel --weights-dir DIR --ep E
//        [--steps N] [--seq T] [--micro-batch B]   (defaults 6, 256, 1)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_util.h"
#include "cli/expert_traffic.h"
#include "cli/mesh_sizes_from_config.h"
#include "config/loader.h"
#include "config/parallelism_config.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "models/model_config.h"
#include "models/pretrained.h"
#include "train/trainer.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using namespace tessel::bench;

struct Args {
  std::string weights_dir;
  int ep = 1;
  int steps = 6;
  int64_t seq = 256;
  int64_t micro_batch = 1;
};

Args parse_args(int argc, char** argv) {
  Args a;
  const std::string usage =
      "usage: bench_expert_parallel --weights-dir DIR --ep E [--steps N] [--seq T] [--micro-batch B]";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw tessel::UsageError(fmt::format("{} needs a value ({})", arg, usage));
      return argv[++i];
    };
    if (arg == "--weights-dir") {
      a.weights_dir = value();
    } else if (arg == "--ep") {
      a.ep = std::stoi(value());
    } else if (arg == "--steps") {
      a.steps = std::stoi(value());
    } else if (arg == "--seq") {
      a.seq = std::stoll(value());
    } else if (arg == "--micro-batch") {
      a.micro_batch = std::stoll(value());
    } else {
      throw tessel::UsageError(fmt::format("unknown argument '{}' ({})", arg, usage));
    }
  }
  if (a.weights_dir.empty() || a.ep < 1 || a.steps < 2 || a.seq < 2 || a.micro_batch < 1) {
    throw tessel::UsageError(usage + " (steps >= 2: step 1 is left out)");
  }
  return a;
}

// Per rank, all-gathered to rank 0 as doubles.
enum Field : int64_t {
  kExpertBytes,
  kDenseBytes,
  kPeakRss,
  kAllToAllSent,
  kRowsSent,
  kRowsReceived,
  kNumFields
};

}  // namespace

int main(int argc, char** argv) {
  using namespace tessel;
  const Args args = parse_args(argc, argv);
  auto world = dist::world();
  const int me = world->rank(), n = world->size();
  at::set_num_threads(1);

  const fs::path config_json = fs::path(source_dir()) / "bench/configs/mixtral-115m/config.json";
  const models::ModelConfig model_config = models::load_model_config(config_json);
  if (me == 0 && !fs::exists(fs::path(args.weights_dir) / "model.safetensors")) {
    models::save_initialized(model_config, 42, at::kFloat, args.weights_dir);
  }
  world->barrier();

  const std::vector<std::string> overrides = {
      "policy.model_name=" + args.weights_dir,
      "policy.max_total_sequence_length=" + std::to_string(args.seq),
      "policy.train_global_batch_size=" + std::to_string(n * args.micro_batch),
      "policy.train_micro_batch_size=" + std::to_string(args.micro_batch),
      "policy.precision=float32",
      "policy.dtensor_cfg._v2=true",
      "policy.dtensor_cfg.expert_parallel_size=" + std::to_string(args.ep),
      "data.train.dataset_name=synthetic",
      "~data.validation",
      "sft.max_num_epochs=1",
      "sft.max_num_steps=" + std::to_string(args.steps),
      "sft.val_period=0",
      "sft.val_at_start=false",
      "sft.val_at_end=false",
      "checkpointing.enabled=false",
      "+logger.rank_metrics_period=1"};  // every step's sent bytes (train/metrics.h)
  const config::Config cfg = config::load_config(fs::path(source_dir()) / "examples/configs/sft.yaml", overrides);
  const dist::DeviceMesh mesh(dist::MeshLayout(cli::mesh_sizes_from(config::parallelism_from(cfg), n)), world);
  train::RunOptions run;
  run.quiet = true;
  run.write_logs = false;
  train::TrainResult result = train::train(cfg, mesh, run);

  std::vector<double> local(kNumFields, 0.0);
  for (size_t i = 0; i < result.model.params.size(); ++i) {
    const bool expert = cli::expert_of(result.model.param_names[i]) >= 0;
    local[expert ? kExpertBytes : kDenseBytes] += static_cast<double>(result.model.params[i].nbytes());
  }
  local[kPeakRss] = static_cast<double>(proc_status_bytes("VmHWM"));
  if (result.model.ep_group) {
    const dist::CollectiveCounters c = result.model.ep_group->counters();
    const int kind = static_cast<int>(dist::CollectiveKind::AllToAll);
    local[kAllToAllSent] = static_cast<double>(c.sent_same_node[kind] + c.sent_other_node[kind]);
    local[kRowsSent] = static_cast<double>(result.model.expert_stats->rows_sent);
    local[kRowsReceived] = static_cast<double>(result.model.expert_stats->rows_received);
  }
  const at::Tensor mine = at::tensor(local, at::kDouble);
  at::Tensor all = at::zeros({n * kNumFields}, at::kDouble);
  world->all_gather_into(all, mine);

  if (me == 0) {
    const auto* a = all.data_ptr<double>();
    auto i64 = [](double x) { return static_cast<int64_t>(std::llround(x)); };
    std::vector<double> tokens_per_s, step_s;
    for (size_t s = 1; s < result.steps.size(); ++s) {
      tokens_per_s.push_back(result.steps[s].tokens_per_s);
      step_s.push_back(result.steps[s].step_time_s);
    }
    std::vector<int64_t> expert_bytes, dense_bytes, peak_rss;
    int64_t sent = 0, rows_sent = 0, rows_received = 0;
    for (int r = 0; r < n; ++r) {
      const double* f = a + r * kNumFields;
      expert_bytes.push_back(i64(f[kExpertBytes]));
      dense_bytes.push_back(i64(f[kDenseBytes]));
      peak_rss.push_back(i64(f[kPeakRss]));
      sent += i64(f[kAllToAllSent]);
      rows_sent += i64(f[kRowsSent]);
      rows_received += i64(f[kRowsReceived]);
    }
    cli::ExpertExchangeShape shape;
    shape.hidden = model_config.hidden_size;
    shape.num_experts = model_config.num_experts;
    shape.ep = args.ep;
    const int64_t steps = static_cast<int64_t>(result.steps.size());
    // Every rank runs one micro batch per step here (global batch = world x micro batch).
    const int64_t forward_calls = cli::sparse_layer_count(model_config) * steps;
    const int64_t closed_form = cli::expert_exchange_bytes(shape, n * forward_calls, rows_sent, rows_received);
    const int64_t uniform =
        n * steps * cli::uniform_expert_exchange(model_config, shape, args.micro_batch * args.seq, 1).bytes_per_rank;
    ordered_json j;
    j["bench"] = "expert_parallel";
    j["date"] = utc_timestamp();
    j["host"] = host_name();
    j["model"] = "bench/configs/mixtral-115m";
    j["world"] = n;
    j["ep"] = args.ep;
    j["ep_shard"] = n / args.ep;
    j["seq"] = args.seq;
    j["micro_batch"] = args.micro_batch;
    j["steps"] = steps;
    j["tokens_per_step"] = result.steps.front().tokens;
    j["tokens_per_s_median"] = median(tokens_per_s);
    j["step_s_median"] = median(step_s);
    j["step_s_each"] = [&] {
      std::vector<double> v;
      for (const auto& s : result.steps) v.push_back(s.step_time_s);
      return v;
    }();
    j["loss_first"] = result.steps.front().loss;
    j["loss_last"] = result.steps.back().loss;
    j["expert_bytes_per_rank"] = expert_bytes;
    j["dense_bytes_per_rank"] = dense_bytes;
    j["peak_rss_bytes_per_rank"] = peak_rss;
    j["all_to_all"] = {{"counted_bytes", sent},
                       {"closed_form_bytes", closed_form},
                       {"uniform_estimate_bytes", uniform},
                       {"rows_sent", rows_sent},
                       {"rows_received", rows_received},
                       {"forward_calls_per_rank", forward_calls}};
    // What each mesh group's collectives sent per step (all kinds, summed
    // over ranks; train/link_traffic.h): expert parallelism trades the
    // experts' all-gathers and reduce-scatters for the token exchange.
    ordered_json groups = ordered_json::object();
    for (const auto& s : result.steps) {
      for (const auto& [group, b] : s.sent_bytes) {
        const double per_step = static_cast<double>(b.same_node + b.other_node) / static_cast<double>(steps);
        groups[group] = groups.value(group, 0.0) + per_step;
      }
    }
    j["sent_bytes_per_step_by_group"] = groups;
    j["loadavg"] = read_first_line("/proc/loadavg");
    std::printf("%s\n", j.dump().c_str());
  }
  dist::shutdown();
  return 0;
}
