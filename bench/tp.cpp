// Forward + backward of the "llama-100m" preset under tensor parallelism, fp32
// on the CPU, 1 ATen thread per rank, against the same model run whole.
//
//   --plan none          world 1: the plain model (the baseline row);
//   --plan optimized     the optimized Llama plan (parallel/optimized_plans.h),
//                        no sequence parallelism;
//   --plan optimized_sp  the same plan with sequence parallelism;
//   --plan hf            the HF plan (parallel/hf_plan.h) applied with
//                        vocab_parallel_head = true, so lm_head keeps
//                        vocab-sharded logits like the optimized plans.
// The tp group is the world. Every TP variant computes the loss with
// loss::vocab_parallel_cross_entropy_sum on its vocab-sharded logits.
//
// Correctness: every rank builds the model with seed 0 and first runs it
// WHOLE (forward, summed next-token cross-entropy, backward) on the same
// tokens: that loss and gradient norm are the reference. The gradients are
// then dropped, the model is parallelized in place, and the TP steps must give
// the same loss (relative error <= 1e-4) and the same global gradient norm
// (optim::global_grad_norm: tp-sharded grads summed over the tp group,
// replicated ones counted once). Both checks are printed. No optimizer runs:
// every step sees the same weights and tokens, so every step has that loss.
//
// Timing: per step, after a barrier, fwd = model forward + loss, bwd =
// loss.backward(); medians over the measured steps (warm-up steps dropped).
// Also the process CPU seconds of each (robust to a machine shared with other
// work, but a rank spinning in a collective burns CPU while it waits).
//
// Memory, two measures per rank, each relative to a baseline taken right
// before the step (after a warm-up step, with gradients allocated and zeroed
// in place, so the baseline holds parameters + gradients and the figures are
// activations and backward temporaries only):
//   * alloc_*: bytes of live ATen CPU tensor storage, counted by a wrapper
//     around the default CPU allocator installed at start-up (exact; it misses
//     only memory not allocated through ATen: OpenBLAS / MPI buffers).
//     alloc_after_fwd = held after forward + loss, before backward (what
//     autograd saved, plus logits); alloc_peak = the peak during the step.
//   * rss_*: VmRSS / VmHWM of /proc/self/status; the peak is reset with
//     `echo 5 > /proc/self/clear_refs` before the step. Meaningful when glibc
//     returns freed blocks to the OS: run with MALLOC_MMAP_THRESHOLD_=65536
//     (TP_RSS=1 bench/run_tp.sh), which slows the steps (a page fault per page
//     of every new tensor), so time and RSS are measured in separate runs.
//
// Printed by rank 0, one JSON object per line: one per rank, one summary.
// Usage: bench_tp --plan none|optimized|optimized_sp|hf [--batch B] [--seq T]
//                 [--steps N] [--warmup W]   (defaults 2, 256, 3, 1)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "core/counting_allocator.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "loss/cross_entropy.h"
#include "loss/vocab_parallel_cross_entropy.h"
#include "models/presets.h"
#include "optim/grad_norm.h"
#include "parallel/hf_plan.h"
#include "parallel/optimized_plans.h"
#include "parallel/parallelize.h"
#include "tensor/chunking.h"

namespace {

using nlohmann::ordered_json;
using namespace tessel::bench;
namespace dist = tessel::dist;
namespace parallel = tessel::parallel;

constexpr const char* kPreset = "llama-100m";
constexpr double kLossRelTol = 1e-4;
constexpr double kGradNormRelTol = 1e-3;

// ---- /proc ------------------------------------------------------------------







// ---- Arguments ----------------------------------------------------------------

struct Args {
  std::string plan;
  int64_t batch = 2;
  int64_t seq = 256;
  int steps = 3;
  int warmup = 1;
};

Args parse_args(int argc, char** argv) {
  Args a;
  const std::string usage =
      "usage: bench_tp --plan none|optimized|optimized_sp|hf [--batch B] [--seq T] [--steps N] "
      "[--warmup W]";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw tessel::UsageError(fmt::format("{} needs a value ({})", arg, usage));
      return argv[++i];
    };
    if (arg == "--plan") {
      a.plan = value();
    } else if (arg == "--batch") {
      a.batch = std::stoll(value());
    } else if (arg == "--seq") {
      a.seq = std::stoll(value());
    } else if (arg == "--steps") {
      a.steps = std::stoi(value());
    } else if (arg == "--warmup") {
      a.warmup = std::stoi(value());
    } else {
      throw tessel::UsageError(fmt::format("unknown argument '{}' ({})", arg, usage));
    }
  }
  TESSEL_CHECK(a.plan == "none" || a.plan == "optimized" || a.plan == "optimized_sp" || a.plan == "hf",
               "--plan must be none, optimized, optimized_sp or hf ({})", usage);
  TESSEL_CHECK(a.seq > 1 && a.batch > 0 && a.steps > 0 && a.warmup >= 1,
               "seq > 1, batch > 0, steps > 0, warmup >= 1 required");
  return a;
}

// The distinct parameter tensors with their names (a tied lm_head counted once).
std::vector<std::pair<std::string, at::Tensor>> unique_parameters(tessel::models::CausalLM& model) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  std::set<const void*> seen;
  for (const auto& item : model.named_parameters()) {
    if (seen.insert(item.value().unsafeGetTensorImpl()).second) out.emplace_back(item.key(), item.value());
  }
  return out;
}

// Per rank, in this order (all-gathered to rank 0 as double).
enum Field : int64_t {
  kFwdMedian,
  kBwdMedian,
  kStepMedian,
  kFwdCpuMedian,
  kBwdCpuMedian,
  kAllocBase,
  kAllocAfterFwd,
  kAllocPeak,
  kRssBase,
  kRssAfterFwd,
  kRssPeak,
  kLocalParamBytes,
  kLoss,
  kNumFields
};

}  // namespace

int main(int argc, char** argv) {
  using namespace tessel;
  CountingCpuAllocator::install();

  const Args args = parse_args(argc, argv);
  auto world = dist::world();
  const int n = world->size();
  const int me = world->rank();
  at::set_num_threads(1);  // after dist::world(), which sets its own default
  TESSEL_CHECK((args.plan == "none") == (n == 1), "--plan none runs on 1 rank, the TP plans on more (world {})", n);

  auto model = models::create_preset_model(kPreset, /*seed=*/0);
  const auto& cfg = model->config();
  const int64_t V = cfg.vocab_size;
  int64_t full_numel = 0;
  for (const auto& [name, p] : unique_parameters(*model)) full_numel += p.numel();

  at::manual_seed(1000);  // the same tokens on every rank (tp ranks share the batch)
  const at::Tensor tokens = at::randint(V, {args.batch, args.seq}, at::kLong);
  const at::Tensor labels = loss::next_token_labels(tokens);

  // Reference: the whole model, mean loss and its gradient norm.
  double ref_loss = 0;
  double ref_grad_norm = 0;
  {
    const loss::LossSum ls = loss::cross_entropy_sum(model->forward_logits(tokens), labels);
    const at::Tensor l = ls.sum / static_cast<double>(ls.num_valid.item<int64_t>());
    l.backward();
    ref_loss = l.item<double>();
    optim::GradShardSet whole;
    for (auto& [name, p] : unique_parameters(*model)) whole.grads.push_back(p.grad());
    ref_grad_norm = optim::global_grad_norm({whole});
    for (auto& [name, p] : unique_parameters(*model)) p.mutable_grad() = at::Tensor();
  }

  // Parallelize in place.
  dist::CommunicatorPtr tp = n > 1 ? world : nullptr;
  parallel::ParallelizeResult res;
  std::string plan_origin = "none";
  if (tp) {
    parallel::Plan plan;
    parallel::ParallelizeOptions opts;
    if (args.plan == "hf") {
      parallel::HfPlan hf = parallel::hf_plan(cfg);
      plan = hf.plan;
      plan_origin = hf.origin;
      opts.vocab_parallel_head = true;
    } else {
      auto builder = parallel::find_optimized_plan(cfg.architecture);
      TESSEL_CHECK(builder.has_value(), "no optimized plan for {}", cfg.architecture);
      plan = (*builder)(cfg, parallel::OptimizedPlanOptions{n, args.plan == "optimized_sp"});
      plan_origin = "optimized plan of " + cfg.architecture;
    }
    opts.plan_name = args.plan;
    res = parallel::parallelize(*model, tp, plan, opts);
  }
  const auto params = unique_parameters(*model);
  int64_t local_param_bytes = 0;
  optim::GradShardSet sharded_set, whole_set;
  if (tp) sharded_set.sharded_over = {tp};

  std::vector<double> fwd_s, bwd_s, step_s, step_max_s, fwd_cpu_s, bwd_cpu_s, losses;
  std::vector<double> local(kNumFields, 0.0);
  double grad_norm = 0;
  std::vector<double> alloc_after_fwd, alloc_peak, rss_after_fwd, rss_peak, alloc_base, rss_base;
  bool clear_refs_ok = true;
  const int64_t vocab_offset = tp ? tensor::chunk_offset(V, n, me) : 0;
  for (int s = 0; s < args.warmup + args.steps; ++s) {
    for (const auto& [name, p] : params) {
      if (p.grad().defined()) p.mutable_grad().zero_();  // keep the buffers: part of the baseline
    }
    world->barrier();
    const int64_t a0 = CountingCpuAllocator::live_bytes();
    CountingCpuAllocator::reset_peak();
    clear_refs_ok = reset_peak_rss() && clear_refs_ok;
    const int64_t r0 = proc_status_bytes("VmRSS");
    const double c0 = cpu_seconds();
    const auto t0 = Clock::now();
    const at::Tensor logits = model->forward_logits(tokens);
    const loss::LossSum ls = tp ? loss::vocab_parallel_cross_entropy_sum(logits, labels, vocab_offset, V, tp)
                                : loss::cross_entropy_sum(logits, labels);
    const at::Tensor l = ls.sum / static_cast<double>(ls.num_valid.item<int64_t>());
    const double t_fwd = seconds_since(t0);
    const double c1 = cpu_seconds();
    const int64_t a1 = CountingCpuAllocator::live_bytes();
    const int64_t r1 = proc_status_bytes("VmRSS");
    const auto t1 = Clock::now();
    l.backward();
    const double t_bwd = seconds_since(t1);
    const double c2 = cpu_seconds();
    const int64_t a2 = CountingCpuAllocator::peak_bytes();
    const int64_t r2 = proc_status_bytes("VmHWM");
    const double t_step = t_fwd + t_bwd;
    at::Tensor tmax = at::full({1}, t_step, at::kDouble);
    world->all_reduce(tmax, dist::ReduceOp::Max);
    losses.push_back(l.item<double>());
    if (s >= args.warmup) {
      fwd_s.push_back(t_fwd);
      bwd_s.push_back(t_bwd);
      step_s.push_back(t_step);
      fwd_cpu_s.push_back(c1 - c0);
      bwd_cpu_s.push_back(c2 - c1);
      step_max_s.push_back(tmax.item<double>());
      alloc_base.push_back(static_cast<double>(a0));
      alloc_after_fwd.push_back(static_cast<double>(a1 - a0));
      alloc_peak.push_back(static_cast<double>(a2 - a0));
      rss_base.push_back(static_cast<double>(r0));
      rss_after_fwd.push_back(static_cast<double>(r1 - r0));
      rss_peak.push_back(static_cast<double>(r2 - r0));
    }
  }
  // Gradient norm after the last step (grads were zeroed before it).
  for (const auto& [name, p] : params) {
    local_param_bytes += static_cast<int64_t>(p.nbytes());
    const bool sharded = tp && parallel::is_tp_sharded(res.params.at(name));
    (sharded ? sharded_set : whole_set).grads.push_back(p.grad());
  }
  grad_norm = optim::global_grad_norm({sharded_set, whole_set});

  local[kFwdMedian] = median(fwd_s);
  local[kBwdMedian] = median(bwd_s);
  local[kStepMedian] = median(step_s);
  local[kFwdCpuMedian] = median(fwd_cpu_s);
  local[kBwdCpuMedian] = median(bwd_cpu_s);
  local[kAllocBase] = median(alloc_base);
  local[kAllocAfterFwd] = median(alloc_after_fwd);
  local[kAllocPeak] = median(alloc_peak);
  local[kRssBase] = median(rss_base);
  local[kRssAfterFwd] = median(rss_after_fwd);
  local[kRssPeak] = median(rss_peak);
  local[kLocalParamBytes] = static_cast<double>(local_param_bytes);
  local[kLoss] = losses.back();

  at::Tensor mine = at::tensor(local, at::TensorOptions().dtype(at::kDouble));
  at::Tensor all = at::zeros({n * kNumFields}, at::kDouble);
  world->all_gather_into(all, mine);

  if (me == 0) {
    const std::string date = utc_timestamp();
    const std::string host = host_name();
    const auto* a = all.data_ptr<double>();
    auto i64 = [](double x) { return static_cast<int64_t>(std::llround(x)); };
    double max_loss_rel = 0;
    for (int r = 0; r < n; ++r) {
      const double* f = a + r * kNumFields;
      const double rel = std::abs(f[kLoss] - ref_loss) / std::abs(ref_loss);
      max_loss_rel = std::max(max_loss_rel, rel);
      ordered_json j;
      j["bench"] = "tp";
      j["kind"] = "rank";
      j["plan"] = args.plan;
      j["tp"] = n;
      j["rank"] = r;
      j["fwd_s_median"] = f[kFwdMedian];
      j["bwd_s_median"] = f[kBwdMedian];
      j["step_s_median"] = f[kStepMedian];
      j["fwd_cpu_s_median"] = f[kFwdCpuMedian];
      j["bwd_cpu_s_median"] = f[kBwdCpuMedian];
      j["local_param_bytes"] = i64(f[kLocalParamBytes]);
      j["alloc_base_bytes"] = i64(f[kAllocBase]);
      j["alloc_after_fwd_bytes"] = i64(f[kAllocAfterFwd]);
      j["alloc_peak_bytes"] = i64(f[kAllocPeak]);
      j["rss_base_bytes"] = i64(f[kRssBase]);
      j["rss_after_fwd_bytes"] = i64(f[kRssAfterFwd]);
      j["rss_peak_bytes"] = i64(f[kRssPeak]);
      j["loss"] = f[kLoss];
      j["loss_rel_err"] = rel;
      std::printf("%s\n", j.dump().c_str());
    }
    // Every step has the same weights and tokens: all step losses must match.
    for (double x : losses) max_loss_rel = std::max(max_loss_rel, std::abs(x - ref_loss) / std::abs(ref_loss));
    const double grad_rel = std::abs(grad_norm - ref_grad_norm) / std::abs(ref_grad_norm);
    const double t = median(step_max_s);
    ordered_json j;
    j["bench"] = "tp";
    j["kind"] = "summary";
    j["date"] = date;
    j["host"] = host;
    j["hardware_threads"] = static_cast<int>(std::thread::hardware_concurrency());
    j["at_num_threads"] = at::get_num_threads();
    j["loadavg"] = read_first_line("/proc/loadavg");
    j["malloc_mmap_threshold"] = std::getenv("MALLOC_MMAP_THRESHOLD_") ? std::getenv("MALLOC_MMAP_THRESHOLD_") : "";
    j["clear_refs_ok"] = clear_refs_ok;
    j["preset"] = kPreset;
    j["params"] = full_numel;
    j["plan"] = args.plan;
    j["plan_origin"] = plan_origin;
    j["vocab_parallel_loss"] = tp != nullptr;
    j["tp"] = n;
    j["batch"] = args.batch;
    j["seq"] = args.seq;
    j["warmup_steps"] = args.warmup;
    j["measured_steps"] = args.steps;
    j["step_s_median_of_rank_max"] = t;
    j["step_s_rank_max_each"] = step_max_s;
    j["tokens_per_s"] = static_cast<double>(args.batch * args.seq) / t;
    j["loss"] = losses.back();
    j["losses"] = losses;
    j["reference_loss"] = ref_loss;
    j["loss_max_rel_err"] = max_loss_rel;
    j["loss_check"] = max_loss_rel <= kLossRelTol ? "pass" : "FAIL";
    j["grad_norm"] = grad_norm;
    j["reference_grad_norm"] = ref_grad_norm;
    j["grad_norm_rel_err"] = grad_rel;
    j["grad_norm_check"] = grad_rel <= kGradNormRelTol ? "pass" : "FAIL";
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  dist::shutdown();
  return 0;
}
