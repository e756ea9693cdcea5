// The attention cores side by side on one thread: causal_attention (whole
// row, autograd) against tiled_causal_attention at several query tiles and,
// where the build has it (libtorch 2.5+, nn/library_attention.h), libtorch's
// fused kernel; forward + backward at bench-medium's shapes (B 2, 8 query /
// 4 kv heads, head_dim 64) and longer rows. Rounds interleave the kernels
// (the machine drifts); the median per kernel is printed, one line each.
// With --documents N the rows are packed with N documents each (random
// lengths, the last row's tail padding): the tiled kernel with the ids as a
// mask against the same kernel once per document (nn/document_runs.h), and
// the library's masked kernel against its causal one per document where the
// build has it; one JSON line per kernel.
//
// With --device (e.g. cuda:0; the CUDA build) the tensors live there, each
// timing waits for the device, and the packed rows compare the library's
// kernels only (the tiled one is the CPU's).
//
// --bfloat16 makes q, k, v (and the gradients) bfloat16, as a GPU trains.
//
// Usage: bench_attention_kernels [--seq T ...] [--rounds N] [--documents N] [--device D] [--bfloat16]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "nn/attention.h"
#include "nn/document_runs.h"
#include "nn/library_attention.h"
#include "nn/tiled_attention.h"

namespace {

using Kernel = std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>;

double fwd_bwd_seconds(const Kernel& kernel, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                       const at::Tensor& dout) {
  const at::Tensor qg = q.detach().requires_grad_(), kg = k.detach().requires_grad_(), vg = v.detach().requires_grad_();
  const auto t0 = tessel::bench::Clock::now();
  kernel(qg, kg, vg).backward(dout);
  // Reading a value waits for a device's queue (a no-op wait on the CPU).
  if (!q.device().is_cpu()) (void)vg.grad().select(0, 0).sum().item<double>();
  return tessel::bench::seconds_since(t0);
}


// Rows of `documents` documents each, lengths drawn at random (each at
// least 1); row 1 ends in padding (-1) for its last document's length.
at::Tensor packed_document_ids(int64_t rows, int64_t T, int64_t documents) {
  at::Tensor ids = at::empty({rows, T}, at::kLong);
  for (int64_t b = 0; b < rows; ++b) {
    // documents - 1 distinct cut points in [1, T).
    const at::Tensor cuts = std::get<0>(at::randperm(T - 1, at::kLong).narrow(0, 0, documents - 1).add(1).sort());
    int64_t doc = 0, next = 0;
    for (int64_t t = 0; t < T; ++t) {
      if (next < documents - 1 && t == cuts[next].item<int64_t>()) ++doc, ++next;
      ids[b][t] = (b == 1 && doc == documents - 1) ? -1 : doc;
    }
  }
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tessel::nn;
  std::vector<int64_t> seqs;
  int rounds = 7;
  int64_t documents = 0;
  std::string device_name = "cpu";
  at::ScalarType dtype = at::kFloat;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--rounds") rounds = std::atoi(argv[++i]);
    else if (a == "--seq") seqs.push_back(std::atoll(argv[++i]));
    else if (a == "--documents") documents = std::atoll(argv[++i]);
    else if (a == "--device") device_name = argv[++i];
    else if (a == "--bfloat16") dtype = at::kBFloat16;
  }
  if (seqs.empty()) seqs = {256, 1024};
  at::set_num_threads(1);
  const int64_t B = 2, Hq = 8, Hkv = 4, D = 64;
  const double scale = 0.125;
  for (const int64_t T : seqs) {
    at::manual_seed(0);
    // As Attention passes them: [B, T, heads, D] projections viewed as [B, heads, T, D].
    const c10::Device device(device_name);
    const at::Tensor q = at::randn({B, T, Hq, D}).to(device, dtype).transpose(1, 2);
    const at::Tensor k = at::randn({B, T, Hkv, D}).to(device, dtype).transpose(1, 2);
    const at::Tensor v = at::randn({B, T, Hkv, D}).to(device, dtype).transpose(1, 2);
    const at::Tensor dout = at::randn({B, Hq, T, D}).to(device, dtype);
    if (documents > 1) {
      const at::Tensor ids = packed_document_ids(B, T, documents);
      const DocumentRuns runs = *document_runs(ids);
      auto per_document = [&](CausalAttentionCore core) -> Kernel {
        return [&, core](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
          return attend_per_document(a, b, c, runs, core);
        };
      };
      std::vector<std::pair<std::string, Kernel>> packed;
      if (device.is_cpu()) {
        packed.emplace_back("tiled, documents as a mask",
                            [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
                              return tiled_causal_attention(a, b, c, scale, std::nullopt, std::nullopt, ids);
                            });
        packed.emplace_back("tiled, per document",
                            per_document([&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
                              return tiled_causal_attention(a, b, c, scale);
                            }));
      }
      if (library_attention_available()) {
        packed.emplace_back("library, documents as a mask",
                            [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
                              return library_causal_attention(a, b, c, scale, std::nullopt, ids);
                            });
        packed.emplace_back("library, per document",
                            per_document([&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
                              return library_causal_attention(a, b, c, scale);
                            }));
      }
      std::vector<std::vector<double>> times(packed.size());
      for (int r = 0; r <= rounds; ++r) {
        for (std::size_t i = 0; i < packed.size(); ++i) {
          const double s = fwd_bwd_seconds(packed[i].second, q, k, v, dout);
          if (r > 0) times[i].push_back(s);
        }
      }
      for (std::size_t i = 0; i < packed.size(); ++i) {
        fmt::print("{{\"bench\": \"attention_packed\", \"seq\": {}, \"rows\": {}, \"documents_per_row\": {}, "
                   "\"kernel\": \"{}\", \"device\": \"{}\", \"dtype\": \"{}\", \"fwd_bwd_median_ms\": {:.3f}, "
                   "\"rounds\": {}}}\n",
                   T, B, documents, packed[i].first, device.str(), c10::toString(dtype),
                   1000 * tessel::bench::median(times[i]), rounds);
      }
      continue;
    }
    std::vector<std::pair<std::string, Kernel>> kernels = {
        {"causal_attention", [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
           return causal_attention(a, b, c, scale);
         }}};
    for (int64_t tile : {32, 64, 128, 256}) {
      if (tile > T) continue;
      kernels.emplace_back(fmt::format("tiled_causal_attention tile {}", tile),
                           [&, tile](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
                             return tiled_causal_attention(a, b, c, scale, std::nullopt, std::nullopt, {}, tile);
                           });
    }
    if (library_attention_available()) {
      kernels.emplace_back("library_causal_attention", [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
        return library_causal_attention(a, b, c, scale);
      });
    }
    std::vector<std::vector<double>> times(kernels.size());
    for (int r = 0; r <= rounds; ++r) {
      for (std::size_t i = 0; i < kernels.size(); ++i) {
        const double s = fwd_bwd_seconds(kernels[i].second, q, k, v, dout);
        if (r > 0) times[i].push_back(s);  // round 0 warms up
      }
    }
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      fmt::print("T {:>5}  {:<32} fwd+bwd median {:.2f} ms (x{:.2f} of causal_attention)\n", T, kernels[i].first,
                 1000 * tessel::bench::median(times[i]), tessel::bench::median(times[i]) / tessel::bench::median(times[0]));
    }
  }
  return 0;
}
