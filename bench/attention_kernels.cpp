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
// With --window W (builds with the library's kernel) a sliding window of W:
// the library's masked kernel over whole rows with the window as one [T, T]
// mask against the same kernel in bands of queries (nn/window_bands.h), and
// on the CPU the tiled kernel (which skips the tiles outside the window);
// one JSON line per kernel.
//
// On a device in bfloat16 both modes add the library's variable-length
// flash kernel (nn/varlen_attention.h): every document, or the window, in
// one call.
//
// Usage: bench_attention_kernels [--seq T ...] [--rounds N] [--documents N] [--window W] [--device D]
//                                [--bfloat16]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_util.h"
#include "nn/attention.h"
#include "nn/document_runs.h"
#include "nn/library_attention.h"
#include "nn/tiled_attention.h"
#include "nn/varlen_attention.h"
#include "nn/window_bands.h"

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

// Each kernel's median fwd + bwd seconds over `rounds`, the kernels taken in
// turn each round (the machine drifts); a first round warms them up.
std::vector<double> median_seconds(const std::vector<std::pair<std::string, Kernel>>& kernels, int rounds,
                                   const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const at::Tensor& dout) {
  std::vector<std::vector<double>> times(kernels.size());
  for (int r = 0; r <= rounds; ++r) {
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      const double s = fwd_bwd_seconds(kernels[i].second, q, k, v, dout);
      if (r > 0) times[i].push_back(s);
    }
  }
  std::vector<double> medians;
  for (const auto& t : times) medians.push_back(tessel::bench::median(t));
  return medians;
}

// The library's variable-length kernel over `runs` (nn/varlen_attention.h).
Kernel varlen_kernel(tessel::nn::DocumentRuns runs, std::optional<int64_t> window, double scale) {
  return [runs = std::move(runs), window, scale](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
    return tessel::nn::attend_varlen(a, b, c, runs, window,
                                     [scale](const at::Tensor& x, const at::Tensor& y, const at::Tensor& z,
                                             const at::Tensor& lengths, int64_t longest, std::optional<int64_t> w) {
                                       return tessel::nn::library_varlen_attention(x, y, z, lengths, longest, w,
                                                                                   scale);
                                     });
  };
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
  int64_t window = 0;
  std::string device_name = "cpu";
  at::ScalarType dtype = at::kFloat;
  const char* usage =
      "usage: bench_attention_kernels [--seq T ...] [--rounds N] [--documents N] [--window W] [--device D] "
      "[--bfloat16]\n";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool takes_value = a == "--rounds" || a == "--seq" || a == "--documents" || a == "--window" ||
                             a == "--device";
    if (a == "--help" || a == "-h") {
      std::printf("%s", usage);
      return 0;
    } else if (a == "--bfloat16") {
      dtype = at::kBFloat16;
    } else if (!takes_value || i + 1 == argc) {
      std::fprintf(stderr, "bench_attention_kernels: %s '%s'\n%s",
                   takes_value ? "no value after" : "unknown argument", a.c_str(), usage);
      return 2;
    } else {
      const char* value = argv[++i];
      if (a == "--rounds") rounds = std::atoi(value);
      else if (a == "--seq") seqs.push_back(std::atoll(value));
      else if (a == "--documents") documents = std::atoll(value);
      else if (a == "--window") window = std::atoll(value);
      else device_name = value;
    }
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
    if (window > 0) {
      if (!library_attention_available()) {
        fmt::print(stderr, "--window compares the library's kernels; this build's libtorch has none\n");
        return 2;
      }
      // Causal and within the window: i - W < j <= i.
      const at::Tensor one_mask =
          at::ones({T, T}, at::TensorOptions().dtype(at::kBool).device(device)).tril().triu(-(window - 1));
      std::vector<std::pair<std::string, Kernel>> windowed;
      if (device.is_cpu()) {
        windowed.emplace_back("tiled, window", [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
          return tiled_causal_attention(a, b, c, scale, window);
        });
      }
      windowed.emplace_back("library, window as one mask",
                            [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
                              return library_masked_attention(a, b, c, one_mask.view({1, 1, T, T}), scale);
                            });
      windowed.emplace_back("library, window in bands",
                            [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
                              return attend_in_window_bands(
                                  a, b, c, window, {},
                                  [&](const at::Tensor& bq, const at::Tensor& bk, const at::Tensor& bv,
                                      const at::Tensor& visible) {
                                    return library_masked_attention(bq, bk, bv, visible, scale);
                                  });
                            });
      if (library_varlen_attention_fits(q)) {
        windowed.emplace_back("library varlen, window", varlen_kernel(whole_rows(B, T), window, scale));
      }
      const std::vector<double> medians = median_seconds(windowed, rounds, q, k, v, dout);
      for (std::size_t i = 0; i < windowed.size(); ++i) {
        fmt::print("{{\"bench\": \"attention_window\", \"seq\": {}, \"rows\": {}, \"window\": {}, "
                   "\"kernel\": \"{}\", \"bands_chosen\": {}, \"device\": \"{}\", \"dtype\": \"{}\", "
                   "\"fwd_bwd_median_ms\": {:.3f}, \"rounds\": {}}}\n",
                   T, B, window, windowed[i].first, window_bands_pay(T, window), device.str(),
                   c10::toString(dtype), 1000 * medians[i], rounds);
      }
      continue;
    }
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
      if (library_varlen_attention_fits(q)) {
        packed.emplace_back("library varlen, one call", varlen_kernel(runs, std::nullopt, scale));
      }
      const std::vector<double> medians = median_seconds(packed, rounds, q, k, v, dout);
      for (std::size_t i = 0; i < packed.size(); ++i) {
        fmt::print("{{\"bench\": \"attention_packed\", \"seq\": {}, \"rows\": {}, \"documents_per_row\": {}, "
                   "\"kernel\": \"{}\", \"device\": \"{}\", \"dtype\": \"{}\", \"fwd_bwd_median_ms\": {:.3f}, "
                   "\"rounds\": {}}}\n",
                   T, B, documents, packed[i].first, device.str(), c10::toString(dtype), 1000 * medians[i],
                   rounds);
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
    const std::vector<double> medians = median_seconds(kernels, rounds, q, k, v, dout);
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      fmt::print("T {:>5}  {:<32} fwd+bwd median {:.2f} ms (x{:.2f} of causal_attention)\n", T, kernels[i].first,
                 1000 * medians[i], medians[i] / medians[0]);
    }
  }
  return 0;
}
