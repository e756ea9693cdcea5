// Where one single-process training step of a model spends its time, op by
// op: forward (model + mean cross-entropy), backward and AdamW, recorded with
// libtorch's profiler (every ATen op and autograd node, nested) and printed
// as self time per op name (time inside an op minus the ops it called), the
// largest first, averaged over the measured steps. The GEMMs show up as
// mm/bmm/addmm, or tessel::onednn_mm / tessel::onednn_bmm where Linear and
// the attention blocks use oneDNN (nn/onednn_sgemm.h); everything else is
// what a custom kernel could shorten.
// Timing the ops adds some overhead per call: compare step times with
// `tessel train`, not with this.
//
// Usage: bench_profile_step [config.json] [--batch B] [--seq T] [--steps N] [--top K]
//   (default: bench/configs/llama-31m/config.json, batch 2, seq 256, 3 measured
//   steps after one warm-up, top 30)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "loss/cross_entropy.h"
#include "models/init.h"
#include "models/model_config.h"
#include "models/registry.h"
#include "optim/adamw.h"

namespace {

namespace prof = torch::autograd::profiler;

struct OpTime {
  double self_us = 0;
  int64_t calls = 0;
};

// Self time per op name from the profiler's per-thread push/pop events.
void accumulate(const prof::thread_event_lists& lists, std::map<std::string, OpTime>& out) {
  for (const auto& events : lists) {
    struct Open {
      const prof::LegacyEvent* push;
      double children_us;
    };
    std::vector<Open> stack;
    for (const auto& e : events) {
      if (e.kind() == prof::EventKind::PushRange) {
        stack.push_back({&e, 0.0});
      } else if (e.kind() == prof::EventKind::PopRange && !stack.empty()) {
        const Open open = stack.back();
        stack.pop_back();
        const double total = open.push->cpuElapsedUs(e);
        OpTime& t = out[open.push->name()];
        t.self_us += total - open.children_us;
        t.calls += 1;
        if (!stack.empty()) stack.back().children_us += total;
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessel;
  std::string config_path = "bench/configs/llama-31m/config.json";
  int64_t batch = 2, seq = 256, steps = 3, top = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return std::atoll(argv[++i]); };
    if (a == "--batch") batch = next();
    else if (a == "--seq") seq = next();
    else if (a == "--steps") steps = next();
    else if (a == "--top") top = next();
    else config_path = a;
  }
  at::set_num_threads(1);
  std::ifstream in(config_path);
  std::stringstream text;
  text << in.rdbuf();
  const models::ModelConfig cfg = models::parse_model_config(text.str());
  auto model = models::build_model(cfg);
  models::init_weights(*model, 7);
  std::vector<at::Tensor> params;
  for (const auto& item : model->named_parameters()) params.push_back(item.value());
  optim::AdamW adamw(params, optim::AdamWOptions{});
  at::manual_seed(0);
  const at::Tensor tokens = at::randint(cfg.vocab_size, {batch, seq}, at::kLong);
  const at::Tensor labels = loss::next_token_labels(tokens);

  std::map<std::string, OpTime> ops;
  double step_s = 0;
  for (int64_t s = 0; s <= steps; ++s) {
    const bool measured = s > 0;  // step 0 warms up (first-touch of the optimizer state)
    if (measured) prof::enableProfilerLegacy(prof::ProfilerConfig(prof::ProfilerState::CPU));
    const auto t0 = std::chrono::steady_clock::now();
    adamw.zero_grad();
    const loss::LossSum ls = loss::cross_entropy_sum(model->forward_logits(tokens), labels);
    (ls.sum / static_cast<double>(ls.num_valid.item<int64_t>())).backward();
    {
      RECORD_USER_SCOPE("AdamW.step");
      adamw.step();
    }
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (measured) {
      step_s += t / static_cast<double>(steps);
      accumulate(prof::disableProfilerLegacy(), ops);
    }
  }
  std::vector<std::pair<std::string, OpTime>> sorted(ops.begin(), ops.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.self_us > b.second.self_us; });
  double total_ms = 0;
  for (const auto& [name, t] : sorted) total_ms += t.self_us / 1000.0 / static_cast<double>(steps);
  fmt::print("{}: batch {} seq {}, step {:.3f} s (profiled), ops' self time {:.1f} ms per step\n", config_path, batch,
             seq, step_s, total_ms);
  fmt::print("{:>10} {:>7} {:>8}  {}\n", "ms/step", "%", "calls", "op");
  for (int64_t i = 0; i < std::min<int64_t>(top, static_cast<int64_t>(sorted.size())); ++i) {
    const auto& [name, t] = sorted[static_cast<std::size_t>(i)];
    const double ms = t.self_us / 1000.0 / static_cast<double>(steps);
    fmt::print("{:>10.2f} {:>7.1f} {:>8}  {}\n", ms, 100.0 * ms / total_ms, t.calls / steps, name);
  }
  return 0;
}
