#include "cli/machine_probe.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "core/compute_threads.h"
#include "loss/cross_entropy.h"
#include "models/causal_lm.h"
#include "models/registry.h"
#include "optim/adamw.h"
#include "optim/grad_norm.h"
#include "train/memory.h"

namespace tessel::cli {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

double gemm_gflops() {
  core::ComputeThreadsScope one_thread(1);  // a rank computes on one thread (TESSEL_NUM_THREADS aside)
  const int64_t n = 512;
  const at::Tensor a = at::randn({n, n}), b = at::randn({n, n});
  at::Tensor c = at::mm(a, b);  // warm-up
  double best = 1e9;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    c = at::mm(a, b);
    best = std::min(best, seconds_since(t0));
  }
  return 2.0 * n * n * n / best / 1e9;
}

double copy_gbytes_s() {
  const std::size_t bytes = std::size_t{64} << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::memcpy(dst.data(), src.data(), bytes);  // fault the pages in
  double best = 1e9;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    best = std::min(best, seconds_since(t0));
  }
  return static_cast<double>(bytes) / best / 1e9;
}

namespace {

// One stream of 64 MiB through a loopback connection; 0 when sockets are not
// available here.
double one_tcp_stream_gbytes_s() {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(listener);
    return 0;
  }
  const std::size_t bytes = std::size_t{64} << 20;
  std::thread sender([addr, bytes] {
    const int s = ::socket(AF_INET, SOCK_STREAM, 0);
    if (s < 0) return;
    if (::connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0) {
      std::vector<char> buf(std::size_t{1} << 20, 7);
      for (std::size_t sent = 0; sent < bytes;) {
        const ssize_t k = ::send(s, buf.data(), std::min(buf.size(), bytes - sent), 0);
        if (k <= 0) break;
        sent += static_cast<std::size_t>(k);
      }
    }
    ::close(s);
  });
  double rate = 0;
  const int conn = ::accept(listener, nullptr, nullptr);
  if (conn >= 0) {
    std::vector<char> buf(std::size_t{1} << 20);
    std::size_t got = 0;
    const auto t0 = Clock::now();
    for (;;) {
      const ssize_t k = ::recv(conn, buf.data(), buf.size(), 0);
      if (k <= 0) break;
      got += static_cast<std::size_t>(k);
    }
    const double s = seconds_since(t0);
    rate = got == bytes && s > 0 ? static_cast<double>(got) / s / 1e9 : 0;
    ::close(conn);
  }
  sender.join();
  ::close(listener);
  return rate;
}

}  // namespace

// The fastest of three streams: one stream's rate varied 13-34 Gbit/s
// between runs on a quiet 2-core machine (and 5 in a busy moment).
double tcp_gbytes_s() {
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) best = std::max(best, one_tcp_stream_gbytes_s());
  return best;
}

int64_t runtime_rss_bytes() { return train::current_rss_bytes(); }

std::optional<MicroBatchTiming> measure_micro_batch(const models::ModelConfig& model, int tp, int64_t micro_batch,
                                                    int64_t seq_len, int64_t max_layer_bytes) {
  models::ModelConfig local = model;
  local.num_attention_heads = std::max<int64_t>(1, model.num_attention_heads / tp);
  local.num_key_value_heads = std::max<int64_t>(1, model.num_key_value_heads / tp);
  if (local.head_dim == 0) local.head_dim = model.hidden_size / model.num_attention_heads;
  local.intermediate_size = std::max<int64_t>(1, model.intermediate_size / tp);
  local.vocab_size = std::max<int64_t>(1, model.vocab_size / tp);
  const int64_t layer_bytes = 4 * (model.hidden_size * local.head_dim *
                                       (2 * local.num_attention_heads + 2 * local.num_key_value_heads) +
                                   3 * model.hidden_size * local.intermediate_size);
  const int64_t head_bytes = 4 * local.vocab_size * model.hidden_size * 2;
  if (layer_bytes > max_layer_bytes || head_bytes > 4 * max_layer_bytes) return std::nullopt;

  core::ComputeThreadsScope one_thread(1);
  // The median of six timed repetitions (a seventh, first, warms up) of the
  // forward alone and of forward and backward together: the benchmarks
  // report a run's median step, and the fastest repetition, on a shared
  // machine, was 5-10% below it and varied +-10% between runs.
  auto time_layers = [&](int64_t layers) {
    models::ModelConfig c = local;
    c.num_hidden_layers = layers;
    auto m = models::build_model(c);
    {
      at::NoGradGuard no_grad;
      for (auto& p : m->parameters()) p.normal_(0.0, 0.02);
    }
    const at::Tensor ids = at::randint(local.vocab_size, {micro_batch, seq_len}, at::kLong);
    constexpr int kTimed = 6;
    std::vector<double> forward, total;
    for (int rep = 0; rep <= kTimed; ++rep) {
      const auto t0 = Clock::now();
      const at::Tensor loss = loss::cross_entropy_sum(m->forward_logits(ids), ids).sum;
      const double forward_s = seconds_since(t0);
      loss.backward();
      if (rep > 0) {
        forward.push_back(forward_s);
        total.push_back(seconds_since(t0));
      }
      for (auto& p : m->parameters()) p.mutable_grad() = at::Tensor();
    }
    return MicroBatchTiming{median(forward), median(total)};
  };
  // Per decoder layer, the difference between a model of one layer and one
  // of up to six (as many as the model has, and as keep the larger within
  // 1 GiB of weights): the noise of the difference is multiplied by the
  // model's layers over the layers between (with three, a 100M model's
  // prediction varied +-8% between runs; with six, +-1%). The rest
  // (embedding, head, loss) is the one-layer time less a layer.
  const int64_t many = std::clamp<int64_t>((int64_t{1} << 30) / std::max<int64_t>(layer_bytes, 1), 2, 6);
  const int64_t upper = std::max<int64_t>(2, std::min<int64_t>(model.num_hidden_layers, many));
  const MicroBatchTiming one = time_layers(1), more = time_layers(upper);
  auto scale = [&](double t1, double tn) {
    const double layer = std::max(0.0, tn - t1) / static_cast<double>(upper - 1), rest = std::max(0.0, t1 - layer);
    return rest + layer * static_cast<double>(model.num_hidden_layers);
  };
  return MicroBatchTiming{scale(one.forward_s, more.forward_s), scale(one.total_s, more.total_s)};
}

double optimizer_s_per_element() {
  core::ComputeThreadsScope one_thread(1);
  const int64_t n = int64_t{1} << 22;  // 16 MiB per tensor: past the caches, as a rank's shards are
  at::Tensor param = at::randn({n}).set_requires_grad(true);
  optim::AdamWOptions options;
  optim::AdamW adamw({param}, options);
  double best = 1e30;
  for (int rep = 0; rep < 4; ++rep) {  // the first allocates the moments
    param.mutable_grad() = at::randn({n});
    const auto t0 = Clock::now();
    // As a training step does it (train/train_step.cpp): the norm, then the
    // update applying the clip coefficient.
    const double norm = optim::global_grad_norm({optim::GradShardSet{{param.grad()}, {}}});
    adamw.step(optim::clip_coefficient(norm, 1.0));
    adamw.zero_grad();
    if (rep > 0) best = std::min(best, seconds_since(t0));
  }
  return best / static_cast<double>(n);
}

}  // namespace tessel::cli
