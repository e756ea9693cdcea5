// Deterministic per-rank test data: rank r's element i is a small integer
// f(r, i) in [-8, 8], exact in every dtype (bf16 included) and so are its
// sums over up to 8 ranks, so expected results are computed independently on
// each rank, in int64, from f alone.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace tessel::dist::testing {

inline int64_t f(int64_t rank, int64_t i, int64_t seed = 0) {
  return (i * 3 + rank * 5 + seed * 7) % 17 - 8;
}

// Rank r's n elements, starting at logical index `offset`.
inline at::Tensor rank_values(int64_t rank, int64_t n, at::ScalarType dtype, int64_t offset = 0,
                              int64_t seed = 0) {
  at::Tensor t = at::empty({n}, at::kLong);
  auto* p = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) p[i] = f(rank, offset + i, seed);
  return t.to(dtype);
}

// Element-wise SUM (max=false) or MAX over ranks 0..size-1 of f(r, offset+i).
inline at::Tensor reduced_values(int64_t size, int64_t n, at::ScalarType dtype, bool max,
                                 int64_t offset = 0, int64_t seed = 0) {
  at::Tensor t = at::empty({n}, at::kLong);
  auto* p = t.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    int64_t acc = max ? INT64_MIN : 0;
    for (int64_t r = 0; r < size; ++r) {
      const int64_t v = f(r, offset + i, seed);
      acc = max ? std::max(acc, v) : acc + v;
    }
    p[i] = acc;
  }
  return t.to(dtype);
}

}  // namespace tessel::dist::testing
