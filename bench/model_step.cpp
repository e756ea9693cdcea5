// One single-process training step (forward, mean next-token cross-entropy,
// backward, AdamW) of the largest tiny preset and of "llama-100m", fp32 on the
// CPU, printed as one JSON document: per-phase times (warm-up steps dropped),
// memory (RSS high-water mark, parameter/gradient/optimizer bytes, activation
// bytes estimated and measured), achieved model GFLOP/s, and this machine's
// fp32 matmul GFLOP/s measured in the same run for scale. The load average is
// recorded because the machine is usually shared.
//
// Model FLOPs per step (Kaplan et al. / PaLM appendix B, forward + backward):
//   6 * N * B * T  +  12 * L * (heads * head_dim) * T^2 * B
// N = parameters that enter a matmul (every 2-D weight, the input embedding
// counted only when it is also the tied LM head), B batch, T sequence, L
// layers. The attention term counts the full T x T score matrix (no causal
// halving), as PaLM's MFU does.
//
// Usage: bench_model_step [--quick]   (--quick: short sequences, for a smoke run)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "loss/cross_entropy.h"
#include "models/presets.h"
#include "models/registry.h"
#include "optim/adamw.h"

namespace {

using nlohmann::ordered_json;
using namespace tessel::bench;






std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

ordered_json matmul_gflops(int64_t n, int reps) {
  const at::Tensor a = at::randn({n, n}), b = at::randn({n, n});
  at::Tensor c = at::mm(a, b);  // warm-up
  std::vector<double> times;
  const double cpu0 = cpu_seconds();
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    c = at::mm(a, b);
    times.push_back(seconds_since(t0));
  }
  const double cpu = (cpu_seconds() - cpu0) / reps;
  const double flops = 2.0 * static_cast<double>(n) * n * n;
  const double best = *std::min_element(times.begin(), times.end());
  double mean = 0;
  for (double t : times) mean += t / reps;
  return {{"n", n},
          {"reps", reps},
          {"best_s", best},
          {"gflops_best", flops / best / 1e9},
          {"mean_s", mean},
          {"gflops_mean", flops / mean / 1e9},
          {"cpu_s_mean", cpu},
          {"gflop_per_cpu_s", flops / cpu / 1e9}};
}

struct Counts {
  int64_t params = 0;
  int64_t matmul_params = 0;
};

Counts count_params(const tessel::models::CausalLM& model) {
  Counts c;
  for (const auto& item : model.named_parameters()) {
    c.params += item.value().numel();
    const bool input_embedding = item.key() == "model.embed_tokens.weight";
    if (item.value().dim() == 2 && (!input_embedding || model.tied())) {
      c.matmul_params += item.value().numel();
    }
  }
  return c;
}

// fp32 activations kept for backward, per the Llama-style layer (no
// checkpointing): per token and layer, norm inputs/outputs 4H, q/k/v before
// and after RoPE 2(Hq + 2Hkv), attention output Hq, MLP gate/up/act/product
// 4I, attention scores and probabilities 2 * heads * T; then the final norm
// 2H and the logits with their log-softmax 2V per token.
double activation_bytes_estimate(const tessel::models::ModelConfig& c, int64_t batch, int64_t seq) {
  const double hq = static_cast<double>(c.num_attention_heads * c.head_dim);
  const double hkv = static_cast<double>(c.num_key_value_heads * c.head_dim);
  const double h = static_cast<double>(c.hidden_size), i = static_cast<double>(c.intermediate_size);
  const double per_token_layer =
      4 * h + 2 * (hq + 2 * hkv) + hq + 4 * i + 2.0 * c.num_attention_heads * seq;
  const double per_token = c.num_hidden_layers * per_token_layer + 2 * h + 2.0 * c.vocab_size;
  return 4.0 * per_token * batch * seq;
}

ordered_json bench_case(const std::string& preset, int64_t batch, int64_t seq, int warmup,
                        int measure) {
  using namespace tessel;
  std::fprintf(stderr, "bench_model_step: %s batch %lld seq %lld ...\n", preset.c_str(),
               static_cast<long long>(batch), static_cast<long long>(seq));
  reset_peak_rss();
  const int64_t rss_start = proc_status_bytes("VmRSS");
  auto model = models::create_preset_model(preset, /*seed=*/0);
  const auto& cfg = model->config();
  const Counts counts = count_params(*model);
  std::vector<at::Tensor> params;
  for (const auto& item : model->named_parameters()) params.push_back(item.value());
  optim::AdamWOptions opts;
  opts.lr = 1e-4;
  optim::AdamW adamw(params, opts);

  at::manual_seed(0);
  const at::Tensor tokens = at::randint(cfg.vocab_size, {batch, seq}, at::kLong);
  const at::Tensor labels = loss::next_token_labels(tokens);

  std::vector<double> fwd, bwd, opt, fwd_bwd_cpu;
  std::vector<double> losses;
  int64_t activation_rss_delta = -1;
  for (int s = 0; s < warmup + measure; ++s) {
    adamw.zero_grad();
    const int64_t rss_before = proc_status_bytes("VmRSS");
    const double cpu0 = cpu_seconds();
    auto t0 = Clock::now();
    const loss::LossSum ls = loss::cross_entropy_sum(model->forward_logits(tokens), labels);
    const at::Tensor loss = ls.sum / static_cast<double>(ls.num_valid.item<int64_t>());
    const double t_fwd = seconds_since(t0);
    // First step only: the heap has not yet cached freed blocks, so the RSS
    // growth during forward is the memory kept for backward.
    if (s == 0) activation_rss_delta = proc_status_bytes("VmRSS") - rss_before;
    t0 = Clock::now();
    loss.backward();
    const double t_bwd = seconds_since(t0);
    const double cpu_fwd_bwd = cpu_seconds() - cpu0;
    t0 = Clock::now();
    adamw.step();
    const double t_opt = seconds_since(t0);
    losses.push_back(loss.item<double>());
    if (s >= warmup) {
      fwd.push_back(t_fwd);
      bwd.push_back(t_bwd);
      opt.push_back(t_opt);
      fwd_bwd_cpu.push_back(cpu_fwd_bwd);
    }
  }
  auto mean = [](const std::vector<double>& v) {
    double m = 0;
    for (double x : v) m += x / static_cast<double>(v.size());
    return m;
  };
  const double t_fwd = mean(fwd), t_bwd = mean(bwd), t_opt = mean(opt);
  const double tokens_per_step = static_cast<double>(batch * seq);
  const double attn_width = static_cast<double>(cfg.num_attention_heads * cfg.head_dim);
  const double flops = 6.0 * static_cast<double>(counts.matmul_params) * tokens_per_step +
                       12.0 * static_cast<double>(cfg.num_hidden_layers) * attn_width *
                           static_cast<double>(seq) * static_cast<double>(seq) *
                           static_cast<double>(batch);
  const int64_t param_bytes = counts.params * 4;

  ordered_json j;
  j["preset"] = preset;
  j["architecture"] = cfg.architecture;
  j["params"] = counts.params;
  j["matmul_params"] = counts.matmul_params;
  j["layers"] = cfg.num_hidden_layers;
  j["hidden"] = cfg.hidden_size;
  j["vocab"] = cfg.vocab_size;
  j["batch"] = batch;
  j["seq"] = seq;
  j["warmup_steps"] = warmup;
  j["measured_steps"] = measure;
  j["forward_s"] = t_fwd;
  j["backward_s"] = t_bwd;
  j["forward_backward_s"] = t_fwd + t_bwd;
  j["optimizer_s"] = t_opt;
  j["step_s"] = t_fwd + t_bwd + t_opt;
  j["forward_backward_s_each"] = [&] {
    std::vector<double> v;
    for (size_t i = 0; i < fwd.size(); ++i) v.push_back(fwd[i] + bwd[i]);
    return v;
  }();
  j["model_flops_per_step"] = flops;
  j["achieved_gflops"] = flops / (t_fwd + t_bwd) / 1e9;
  j["forward_backward_cpu_s"] = mean(fwd_bwd_cpu);
  j["gflop_per_cpu_s"] = flops / mean(fwd_bwd_cpu) / 1e9;
  j["tokens_per_s"] = tokens_per_step / (t_fwd + t_bwd + t_opt);
  j["losses"] = losses;
  j["memory"] = {
      {"rss_at_start_bytes", rss_start},
      {"peak_rss_bytes", proc_status_bytes("VmHWM")},
      {"peak_rss_above_start_bytes", proc_status_bytes("VmHWM") - rss_start},
      {"param_bytes", param_bytes},
      {"grad_bytes", param_bytes},
      {"adamw_state_bytes", adamw.state_bytes()},
      {"activation_bytes_estimate", activation_bytes_estimate(cfg, batch, seq)},
      {"activation_bytes_rss_delta_first_forward", activation_rss_delta},
  };
  return j;
}

// The tiny preset with the most parameters (built on the meta device: no memory).
std::string largest_tiny_preset() {
  std::string best;
  int64_t best_params = -1;
  for (const auto& name : tessel::models::preset_names()) {
    if (name.rfind("tiny-", 0) != 0) continue;
    const auto cfg = tessel::models::parse_model_config(tessel::models::make_preset_config(name));
    tessel::models::BuildOptions meta;
    meta.device = c10::Device(c10::kMeta);
    const int64_t n = count_params(*tessel::models::build_model(cfg, meta)).params;
    if (n > best_params) {
      best_params = n;
      best = name;
    }
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  ordered_json out;
  out["bench"] = "model_step";
  const std::string date = utc_timestamp();
  out["date"] = date;
  const std::string host = host_name();
  out["machine"] = {{"host", host},
                    {"cpu", cpu_model()},
                    {"hardware_threads", std::thread::hardware_concurrency()},
                    {"at_num_threads", at::get_num_threads()},
                    {"loadavg_start", read_first_line("/proc/loadavg")}};
  out["flops_formula"] =
      "6 * matmul_params * batch * seq + 12 * layers * (heads * head_dim) * seq^2 * batch";
  std::fprintf(stderr, "bench_model_step: matmul 2048 ...\n");
  out["matmul_fp32"] = matmul_gflops(2048, quick ? 2 : 5);

  const int warmup = 1, measure = quick ? 1 : 3;
  out["cases"] = ordered_json::array();
  out["cases"].push_back(bench_case(largest_tiny_preset(), 4, quick ? 64 : 512, warmup, measure));
  // 100M: 256 tokens, 2 measured steps: a few minutes on 2 busy cores.
  out["cases"].push_back(bench_case("llama-100m", 1, quick ? 32 : 256, warmup, quick ? 1 : 2));
  out["matmul_fp32_end"] = matmul_gflops(2048, quick ? 2 : 5);
  out["machine"]["loadavg_end"] = read_first_line("/proc/loadavg");
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
