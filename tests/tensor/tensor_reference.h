// Single-process references for tensor-layer tests: seeded tensors every rank
// can rebuild, and torch.chunk (not tessel's chunking) to cut expected shards,
// so expectations never come from the code under test.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::tensor::ref {

// fp32: normal values; other dtypes: small integers, so sums are exact in bf16.
inline at::Tensor seeded(const std::vector<int64_t>& shape, uint64_t seed,
                         at::ScalarType dtype = at::kFloat) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  if (dtype == at::kFloat) return at::randn(shape, gen, at::kFloat);
  return at::randint(-4, 5, shape, gen, at::kFloat).to(dtype);
}

// Chunk `rank` of t along dim as torch.chunk cuts it; empty (size 0 along dim)
// for ranks past the chunks torch.chunk returns.
inline at::Tensor chunk_ref(const at::Tensor& t, int64_t dim, int world, int rank) {
  if (t.size(dim) == 0) return t;
  std::vector<at::Tensor> chunks = t.chunk(world, dim);
  if (rank < static_cast<int>(chunks.size())) return chunks[static_cast<size_t>(rank)].contiguous();
  return t.narrow(dim, 0, 0).contiguous();
}

inline void expect_close(const at::Tensor& actual, const at::Tensor& expected, const std::string& what) {
  ASSERT_TRUE(actual.defined()) << what << ": undefined";
  EXPECT_EQ(actual.sizes().vec(), expected.sizes().vec()) << what << ": shape";
  EXPECT_EQ(actual.scalar_type(), expected.scalar_type()) << what << ": dtype";
  if (actual.sizes() != expected.sizes() || actual.scalar_type() != expected.scalar_type()) return;
  const bool exact = expected.scalar_type() != at::kFloat;  // integer-valued data
  const double tol = exact ? 0.0 : 1e-5;
  EXPECT_TRUE(at::allclose(actual.to(at::kFloat), expected.to(at::kFloat), tol, tol))
      << what << ": max abs diff "
      << (actual.to(at::kFloat) - expected.to(at::kFloat)).abs().max().item<float>();
}

inline std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace tessel::tensor::ref
