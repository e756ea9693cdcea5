// One training step of the "llama-100m" preset (forward, mean next-token
// cross-entropy, backward, AdamW) under FSDP, fp32 on the CPU, across MPI
// ranks. The layout follows the world size:
//   world 1           plain model, no FSDP (the reference for the ratios);
//   world 2 / 4       FSDP over all ranks (shard group = world);
//   --hsdp S          HSDP: shard groups of S consecutive ranks ({0,1},{2,3}
//                     for S = 2 at world 4), replicate groups of the ranks
//                     with the same shard rank ({0,2},{1,3}).
// fully_shard is applied to each decoder layer, then to the root.
//
// Printed by rank 0, one JSON object per line: one line per rank (its memory:
// sharded parameter / gradient / AdamW state bytes, peak unsharded parameter
// bytes from FSDPModule::memory_stats(), RSS high-water mark) and one summary
// line (median step time over ranks' max, tokens/s, and per-rank sharded-state
// bytes divided by the world-1 figure, which should be about 1 / shard size:
// sharded state scales with the shard group, not the world, under HSDP).
// Each rank trains on its own batch (data parallel): tokens/s counts
// world * batch * seq tokens per step.
//
// Usage: bench_fsdp [--hsdp S] [--seq T] [--batch B] [--steps N]
//   defaults: seq 128, batch 1, 3 measured steps after 1 warm-up.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "fsdp/fully_shard.h"
#include "loss/cross_entropy.h"
#include "models/presets.h"
#include "optim/adamw.h"

namespace {

using nlohmann::ordered_json;
using namespace tessel::bench;
namespace dist = tessel::dist;
namespace fsdp = tessel::fsdp;

constexpr const char* kPreset = "llama-100m";





struct Args {
  int hsdp = 0;  // shard group size; 0: shard over the whole world
  int64_t seq = 128;
  int64_t batch = 1;
  int steps = 3;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> int64_t {
      if (i + 1 >= argc) throw tessel::UsageError(fmt::format("{} needs a value", arg));
      return std::stoll(argv[++i]);
    };
    if (arg == "--hsdp") {
      a.hsdp = static_cast<int>(value());
    } else if (arg == "--seq") {
      a.seq = value();
    } else if (arg == "--batch") {
      a.batch = value();
    } else if (arg == "--steps") {
      a.steps = static_cast<int>(value());
    } else {
      throw tessel::UsageError(
          fmt::format("unknown argument '{}' (usage: bench_fsdp [--hsdp S] [--seq T] "
                      "[--batch B] [--steps N])",
                      arg));
    }
  }
  TESSEL_CHECK(a.seq > 1 && a.batch > 0 && a.steps > 0, "seq > 1, batch > 0, steps > 0 required");
  return a;
}

// The distinct parameter tensors (a tied embedding / lm_head counted once).
std::vector<at::Tensor> unique_parameters(tessel::models::CausalLM& model) {
  std::vector<at::Tensor> out;
  std::set<const void*> seen;
  for (const auto& item : model.named_parameters()) {
    if (seen.insert(item.value().unsafeGetTensorImpl()).second) out.push_back(item.value());
  }
  return out;
}

int64_t bytes_of(const std::vector<at::Tensor>& ts, bool grads) {
  int64_t b = 0;
  for (const auto& t : ts) {
    const at::Tensor& x = grads ? t.grad() : t;
    if (x.defined()) b += static_cast<int64_t>(x.nbytes());
  }
  return b;
}

// Per rank, in this order (all-gathered to rank 0 as int64).
enum Field : int64_t {
  kParamBytes,
  kGradBytes,
  kOptimBytes,
  kPeakUnshardedBytes,
  kRssHwmBytes,
  kRssAfterBuildBytes,
  kNumFields
};

}  // namespace

int main(int argc, char** argv) {
  using namespace tessel;
  const Args args = parse_args(argc, argv);
  auto world = dist::world();
  const int n = world->size();
  const int me = world->rank();
  // Oversubscribed CPU: share the hardware threads between the ranks.
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (n > 1) at::set_num_threads(std::max(1, hw / n));

  // Layout.
  const int shard_size = args.hsdp > 0 ? args.hsdp : n;
  TESSEL_CHECK(n % shard_size == 0, "--hsdp {} must divide the world size {}", shard_size, n);
  const int replicate_size = n / shard_size;
  std::string layout = n == 1 ? "plain" : (replicate_size > 1 ? "hsdp" : "fsdp");
  dist::CommunicatorPtr shard, replicate;
  if (n > 1) {
    shard = world->split(me / shard_size, me % shard_size, "dp_shard");
    if (replicate_size > 1) replicate = world->split(me % shard_size, me / shard_size, "dp_replicate");
  }

  // Model: built whole on every rank, then sharded.
  auto model = models::create_preset_model(kPreset, /*seed=*/0);
  const auto& cfg = model->config();
  const std::vector<at::Tensor> full_params = unique_parameters(*model);
  int64_t full_numel = 0;
  for (const auto& p : full_params) full_numel += p.numel();
  const int64_t full_param_bytes = bytes_of(full_params, false);

  std::optional<fsdp::FSDPModule> root;
  if (n > 1) {
    fsdp::FSDPMesh mesh(shard, replicate);
    for (const auto& layer : model->decoder_layers()) fsdp::fully_shard(*layer, mesh);
    root = fsdp::fully_shard(*model, mesh);
  }
  const std::vector<at::Tensor> params = unique_parameters(*model);
  optim::AdamWOptions opts;
  opts.lr = 1e-4;
  optim::AdamW adamw(params, opts);
  const int64_t rss_after_build = proc_status_bytes("VmRSS");

  at::manual_seed(1000 + static_cast<uint64_t>(me));  // each rank its own batch
  const at::Tensor tokens = at::randint(cfg.vocab_size, {args.batch, args.seq}, at::kLong);
  const at::Tensor labels = loss::next_token_labels(tokens);

  const int warmup = 1;
  std::vector<double> step_s;  // max over ranks, measured steps only
  std::vector<double> losses;
  std::vector<int64_t> local(kNumFields, 0);
  for (int s = 0; s < warmup + args.steps; ++s) {
    adamw.zero_grad();
    if (root) root->reset_peak_memory();
    world->barrier();
    const auto t0 = Clock::now();
    const loss::LossSum ls = loss::cross_entropy_sum(model->forward_logits(tokens), labels);
    const at::Tensor loss = ls.sum / static_cast<double>(ls.num_valid.item<int64_t>());
    loss.backward();
    adamw.step();
    const double local_s = seconds_since(t0);
    const auto f64 = at::TensorOptions().dtype(at::kDouble);
    at::Tensor tmax = at::full({1}, local_s, f64);
    at::Tensor tsum = at::full({1}, loss.item<double>(), f64);
    world->all_reduce(tmax, dist::ReduceOp::Max);
    world->all_reduce(tsum, dist::ReduceOp::Sum);
    losses.push_back(tsum.item<double>() / n);
    if (s >= warmup) step_s.push_back(tmax.item<double>());
    if (s + 1 == warmup + args.steps) {  // after the last step, grads still held
      if (root) {
        const fsdp::FSDPMemoryStats m = root->memory_stats();
        local[kParamBytes] = m.sharded_param_bytes;
        local[kGradBytes] = m.sharded_grad_bytes;
        local[kPeakUnshardedBytes] = m.peak_unsharded_param_bytes;
      } else {
        local[kParamBytes] = bytes_of(params, false);
        local[kGradBytes] = bytes_of(params, true);
        local[kPeakUnshardedBytes] = 0;
      }
      local[kOptimBytes] = adamw.state_bytes();
    }
  }
  local[kRssHwmBytes] = proc_status_bytes("VmHWM");
  local[kRssAfterBuildBytes] = rss_after_build;

  at::Tensor mine = at::tensor(local, at::TensorOptions().dtype(at::kLong));
  at::Tensor all = at::zeros({n * kNumFields}, at::kLong);
  world->all_gather_into(all, mine);

  if (me == 0) {
    const std::string date = utc_timestamp();
    const std::string host = host_name();
    const double t_step = median(step_s);
    const double tokens_per_step = static_cast<double>(n * args.batch * args.seq);
    // World-1 reference: whole fp32 params, grads, and AdamW's two moments.
    const int64_t ref_state = 4 * full_param_bytes;
    const auto* a = all.data_ptr<int64_t>();
    ordered_json ranks = ordered_json::array();
    int64_t max_state = 0;
    for (int r = 0; r < n; ++r) {
      const int64_t* f = a + r * kNumFields;
      const int64_t state = f[kParamBytes] + f[kGradBytes] + f[kOptimBytes];
      max_state = std::max(max_state, state);
      ordered_json j;
      j["bench"] = "fsdp";
      j["kind"] = "rank";
      j["layout"] = layout;
      j["world"] = n;
      j["rank"] = r;
      j["shard_rank"] = r % shard_size;
      j["sharded_param_bytes"] = f[kParamBytes];
      j["grad_bytes"] = f[kGradBytes];
      j["optimizer_state_bytes"] = f[kOptimBytes];
      j["sharded_state_bytes"] = state;
      j["peak_unsharded_param_bytes"] = f[kPeakUnshardedBytes];
      j["rss_after_build_bytes"] = f[kRssAfterBuildBytes];
      j["rss_hwm_bytes"] = f[kRssHwmBytes];
      j["state_ratio_vs_world1"] = static_cast<double>(state) / static_cast<double>(ref_state);
      j["expected_ratio"] = 1.0 / shard_size;
      std::printf("%s\n", j.dump().c_str());
    }
    ordered_json j;
    j["bench"] = "fsdp";
    j["kind"] = "summary";
    j["date"] = date;
    j["host"] = host;
    j["hardware_threads"] = hw;
    j["at_num_threads"] = at::get_num_threads();
    j["loadavg"] = read_first_line("/proc/loadavg");
    j["preset"] = kPreset;
    j["params"] = full_numel;
    j["layers"] = cfg.num_hidden_layers;
    j["layout"] = layout;
    j["world"] = n;
    j["shard_size"] = n > 1 ? shard_size : 1;
    j["replicate_size"] = replicate_size;
    j["batch_per_rank"] = args.batch;
    j["seq"] = args.seq;
    j["warmup_steps"] = warmup;
    j["measured_steps"] = args.steps;
    j["step_s_median"] = t_step;
    j["step_s_each"] = step_s;
    j["tokens_per_step"] = tokens_per_step;
    j["tokens_per_s"] = tokens_per_step / t_step;
    j["losses"] = losses;
    j["world1_state_bytes"] = ref_state;
    j["max_rank_state_ratio_vs_world1"] =
        static_cast<double>(max_state) / static_cast<double>(ref_state);
    j["expected_ratio"] = 1.0 / shard_size;
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  dist::shutdown();
  return 0;
}
