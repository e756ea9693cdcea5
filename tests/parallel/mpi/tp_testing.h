// Helpers of the tensor-parallel parity tests: seeded weights that are the
// same on every rank, torch.chunk slices for the reference, and comparison of
// every parameter gradient after gathering it from the tp shards.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <string>

#include "dist/communicator.h"
#include "nn/module.h"
#include "parallel/param_registry.h"
#include "tensor/chunking.h"

namespace tessel::parallel::testing {

inline at::Tensor seeded(at::IntArrayRef shape, uint64_t seed, double scale = 1.0) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::randn(shape, gen, at::TensorOptions().dtype(at::kFloat)) * scale;
}

// Fills every parameter from a seed (same values on every rank).
inline void init_params(torch::nn::Module& root, uint64_t seed) {
  at::NoGradGuard no_grad;
  uint64_t k = 0;
  for (auto& item : root.named_parameters()) item.value().copy_(seeded(item.value().sizes(), seed + 1000 * ++k, 0.5));
}

// This rank's torch.chunk slice of `full` along dim.
inline at::Tensor chunk_of(const at::Tensor& full, int64_t dim, const dist::CommunicatorPtr& g) {
  const int64_t d = dim < 0 ? dim + full.dim() : dim;
  const int64_t n = full.size(d);
  return full.narrow(d, tensor::chunk_offset(n, g->size(), g->rank()), tensor::chunk_size(n, g->size(), g->rank()));
}

inline void expect_close(const at::Tensor& got, const at::Tensor& want, const std::string& what, double atol = 2e-5,
                         double rtol = 1e-4) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const bool ok = at::allclose(got, want, rtol, atol);
  EXPECT_TRUE(ok) << what << ": max abs diff " << (got - want).abs().max().item<double>();
}

// Every parameter gradient of `tp_root` (gathered over tp) against `ref_root`'s.
inline void expect_same_grads(torch::nn::Module& ref_root, torch::nn::Module& tp_root, const ParamRegistry& reg,
                              const dist::CommunicatorPtr& g, const std::string& what, double atol = 2e-5) {
  auto tp_params = tp_root.named_parameters();
  for (const auto& item : ref_root.named_parameters()) {
    const std::string& name = item.key();
    const at::Tensor* p = tp_params.find(name);
    ASSERT_NE(p, nullptr) << what << ": " << name;
    at::Tensor grad = p->grad().defined() ? p->grad() : at::zeros_like(*p);
    at::Tensor full = full_tensor(grad, reg.at(name), g);
    at::Tensor want = item.value().grad().defined() ? item.value().grad() : at::zeros_like(item.value());
    expect_close(full, want, what + " grad of " + name, atol);
  }
}

}  // namespace tessel::parallel::testing
