// Context parallelism's memory and time (issue 13): forward + backward of one
// micro batch of long rows through the whole model on every rank, the rows
// cut over the world as the cp group (train/context_batches.h) and attention
// run as the ring (parallel/ring_attention.h); world 1 is the plain model
// (causal_attention over the whole row). fp32, 1 ATen thread per rank.
//
// Model: bench/configs/llama-31m (hidden 512, 8 layers, 8/4 heads, vocab
// 8192), built whole on every rank with seeded values (the same on every
// rank and at every cp size), so the printed loss must agree across cp sizes:
// the run's own correctness check (the parity tests are the real ones).
//
// Memory, from the counting wrapper around ATen's CPU allocator (outside the
// code measured), relative to a baseline taken right before the step after a
// warm-up step (parameters and zeroed gradients are in the baseline):
//   activation_bytes = live after forward + loss, before backward (what
//                      autograd saved for backward, plus the logits);
//   peak_bytes       = the high-water mark during forward and backward.
//
// Overlap of the ring's K/V transfer: the ring counts the shifts that had
// already arrived when their block was needed (hidden entirely behind the
// block compute), the time ranks waited at the others (the exposed transfer
// plus the lag of a slower sender) and the bytes sent. After the steps the
// same shifts are timed alone (same sizes, one after another, each waited at
// once, nothing to overlap): what the transfers would cost unhidden.
// --ring-at-one runs the ring kernel on one rank (no transfers): the same
// attention arithmetic and saved tensors as cp > 1, for the 1/cp scaling.
//
// Printed by rank 0: one JSON line per rank and one summary.
// Usage: bench_context_parallel [--seq T] [--batch B] [--steps N] [--warmup W]
//        (defaults 2048, 1, 2, 1); run under mpirun -np cp.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/counting_allocator.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "loss/cross_entropy.h"
#include "models/model_config.h"
#include "models/registry.h"
#include "parallel/context_parallel.h"
#include "train/context_batches.h"

namespace {

using nlohmann::ordered_json;
using namespace tessel::bench;
namespace dist = tessel::dist;

struct Args {
  int64_t seq = 2048;
  int64_t batch = 1;
  int steps = 2;
  int warmup = 1;
  bool ring_at_one = false;  // world 1: run the ring kernel (a ring of one) instead of causal_attention
};

Args parse_args(int argc, char** argv) {
  Args a;
  const std::string usage = "usage: bench_context_parallel [--seq T] [--batch B] [--steps N] [--warmup W] [--ring-at-one]";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw tessel::UsageError(fmt::format("{} needs a value ({})", arg, usage));
      return argv[++i];
    };
    if (arg == "--seq") {
      a.seq = std::stoll(value());
    } else if (arg == "--batch") {
      a.batch = std::stoll(value());
    } else if (arg == "--steps") {
      a.steps = std::stoi(value());
    } else if (arg == "--warmup") {
      a.warmup = std::stoi(value());
    } else if (arg == "--ring-at-one") {
      a.ring_at_one = true;
    } else {
      throw tessel::UsageError(fmt::format("unknown argument '{}' ({})", arg, usage));
    }
  }
  TESSEL_CHECK(a.seq > 1 && a.batch > 0 && a.steps > 0 && a.warmup >= 1, "seq > 1, batch > 0, steps > 0, warmup >= 1");
  return a;
}

// Per rank, all-gathered to rank 0 as doubles.
enum Field : int64_t {
  kStepMedian,
  kFwdMedian,
  kBwdMedian,
  kActivation,
  kPeak,
  kLossSum,
  kValid,
  kRingCompute,
  kRingWaiting,
  kRingBytes,
  kRingShifts,
  kRingShiftsDone,
  kShiftAlone,
  kNumFields
};

}  // namespace

int main(int argc, char** argv) {
  using namespace tessel;
  CountingCpuAllocator::install();
  const Args args = parse_args(argc, argv);
  auto world = dist::world();
  const int cp = world->size(), me = world->rank();
  at::set_num_threads(1);

  const models::ModelConfig config = models::load_model_config(source_dir() + "/bench/configs/llama-31m/config.json");
  auto model = models::build_model(config);
  {
    at::NoGradGuard no_grad;
    at::manual_seed(0);  // the same values on every rank and at every cp size
    for (auto& item : model->named_parameters()) {
      if (item.key().find("norm") != std::string::npos) {
        item.value().fill_(1.0);
      } else {
        item.value().normal_(0.0, 0.02);
      }
    }
  }
  auto stats = std::make_shared<parallel::RingAttentionStats>();
  const bool ring = cp > 1 || args.ring_at_one;
  if (ring) parallel::apply_context_parallel(*model, world, stats);

  at::manual_seed(1000);  // the same rows on every rank
  train::MicroBatch whole;
  whole.input_ids = at::randint(config.vocab_size, {args.batch, args.seq}, at::kLong);
  whole.labels = loss::next_token_labels(whole.input_ids);
  const train::MicroBatch mine = train::context_parallel_slice(whole, cp, me);
  const at::Tensor positions = mine.position_ids.defined() ? mine.position_ids : at::Tensor();

  std::vector<double> step_s, fwd_s, bwd_s, activation, peak;
  double loss_sum = 0, valid = 0;
  parallel::RingAttentionStats measured;
  for (int s = 0; s < args.warmup + args.steps; ++s) {
    for (auto& item : model->named_parameters()) {
      if (item.value().grad().defined()) item.value().mutable_grad().zero_();
    }
    world->barrier();
    const parallel::RingAttentionStats before = *stats;
    const int64_t a0 = CountingCpuAllocator::live_bytes();
    CountingCpuAllocator::reset_peak();
    const auto t0 = Clock::now();
    const at::Tensor logits = model->forward_logits(mine.input_ids, positions);
    const loss::LossSum ls = loss::cross_entropy_sum(logits, mine.labels);
    const double t_fwd = seconds_since(t0);
    const int64_t a1 = CountingCpuAllocator::live_bytes();
    const auto t1 = Clock::now();
    ls.sum.backward();
    const double t_bwd = seconds_since(t1);
    const int64_t a2 = CountingCpuAllocator::peak_bytes();
    loss_sum = ls.sum.item<double>();
    valid = static_cast<double>(ls.num_valid.item<int64_t>());
    if (s >= args.warmup) {
      fwd_s.push_back(t_fwd);
      bwd_s.push_back(t_bwd);
      step_s.push_back(t_fwd + t_bwd);
      activation.push_back(static_cast<double>(a1 - a0));
      peak.push_back(static_cast<double>(a2 - a0));
      measured.compute_seconds += stats->compute_seconds - before.compute_seconds;
      measured.waiting_seconds += stats->waiting_seconds - before.waiting_seconds;
      measured.bytes_sent += stats->bytes_sent - before.bytes_sent;
      measured.shifts += stats->shifts - before.shifts;
      measured.shifts_done_when_needed += stats->shifts_done_when_needed - before.shifts_done_when_needed;
    }
  }
  // The measured steps' shifts again, alone: per layer, forward sends K/V
  // (cp - 1 times) and backward K/V (cp - 1) and the K/V gradients in fp32
  // (cp times); here each size is shifted that often, waited at once.
  double shift_alone = 0;
  if (cp > 1) {
    const int64_t kv_elements = 2 * args.batch * config.num_key_value_heads * (mine.input_ids.size(1)) * config.head_dim;
    const at::Tensor kv = at::randn({kv_elements}), kv_in = at::empty_like(kv);
    world->barrier();
    const auto t0 = Clock::now();
    for (int step = 0; step < args.steps; ++step) {
      for (int64_t layer = 0; layer < config.num_hidden_layers; ++layer) {
        for (int i = 0; i < 3 * cp - 2; ++i) world->ring_shift_async(kv_in, kv)->wait();
      }
    }
    shift_alone = seconds_since(t0);
  }

  std::vector<double> local(kNumFields, 0.0);
  local[kStepMedian] = median(step_s);
  local[kFwdMedian] = median(fwd_s);
  local[kBwdMedian] = median(bwd_s);
  local[kActivation] = median(activation);
  local[kPeak] = median(peak);
  local[kLossSum] = loss_sum;
  local[kValid] = valid;
  local[kRingCompute] = measured.compute_seconds;
  local[kRingWaiting] = measured.waiting_seconds;
  local[kRingBytes] = static_cast<double>(measured.bytes_sent);
  local[kRingShifts] = static_cast<double>(measured.shifts);
  local[kRingShiftsDone] = static_cast<double>(measured.shifts_done_when_needed);
  local[kShiftAlone] = shift_alone;
  const at::Tensor mine_fields = at::tensor(local, at::kDouble);
  at::Tensor all = at::zeros({cp * kNumFields}, at::kDouble);
  world->all_gather_into(all, mine_fields);

  if (me == 0) {
    const auto* a = all.data_ptr<double>();
    auto i64 = [](double x) { return static_cast<int64_t>(std::llround(x)); };
    double total_loss = 0, total_valid = 0, max_activation = 0, max_peak = 0, max_step = 0, waiting = 0, alone = 0;
    double shifts = 0, shifts_done = 0;
    for (int r = 0; r < cp; ++r) {
      const double* f = a + r * kNumFields;
      total_loss += f[kLossSum];
      total_valid += f[kValid];
      max_activation = std::max(max_activation, f[kActivation]);
      max_peak = std::max(max_peak, f[kPeak]);
      max_step = std::max(max_step, f[kStepMedian]);
      waiting += f[kRingWaiting];
      alone += f[kShiftAlone];
      shifts += f[kRingShifts];
      shifts_done += f[kRingShiftsDone];
      ordered_json j;
      j["bench"] = "context_parallel";
      j["kind"] = "rank";
      j["cp"] = cp;
      j["rank"] = r;
      j["step_s_median"] = f[kStepMedian];
      j["fwd_s_median"] = f[kFwdMedian];
      j["bwd_s_median"] = f[kBwdMedian];
      j["activation_bytes"] = i64(f[kActivation]);
      j["peak_bytes"] = i64(f[kPeak]);
      j["ring_compute_s"] = f[kRingCompute];
      j["ring_waiting_s"] = f[kRingWaiting];
      j["ring_bytes_sent"] = i64(f[kRingBytes]);
      j["ring_shifts"] = i64(f[kRingShifts]);
      j["ring_shifts_done_when_needed"] = i64(f[kRingShiftsDone]);
      j["shifts_alone_s"] = f[kShiftAlone];
      std::printf("%s\n", j.dump().c_str());
    }
    ordered_json j;
    j["bench"] = "context_parallel";
    j["kind"] = "summary";
    j["date"] = utc_timestamp();
    j["host"] = host_name();
    j["model"] = "bench/configs/llama-31m";
    j["seq"] = args.seq;
    j["batch"] = args.batch;
    j["cp"] = cp;
    j["attention"] = ring ? "ring" : "causal_attention (whole rows)";
    j["tokens_per_rank"] = mine.input_ids.size(1);
    j["steps"] = args.steps;
    j["loss"] = total_loss / total_valid;
    j["step_s_max_rank"] = max_step;
    j["activation_bytes_max_rank"] = i64(max_activation);
    j["peak_bytes_max_rank"] = i64(max_peak);
    if (cp > 1) {
      j["ring_waiting_s_all_ranks"] = waiting;
      j["shifts_alone_s_all_ranks"] = alone;
      j["shifts_done_when_needed_fraction"] = shifts > 0 ? shifts_done / shifts : 0.0;
    }
    j["loadavg"] = read_first_line("/proc/loadavg");
    std::printf("%s\n", j.dump().c_str());
  }
  dist::shutdown();
  return 0;
}
