// The kernels' tests compare a result with its reference as at::allclose with
// one tolerance for both its relative and absolute part, and say by how much
// they differ where they do.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>

namespace tessel::test_support {

inline void expect_allclose(const at::Tensor& got, const at::Tensor& want, double tol,
                            const std::string& what) {
  EXPECT_TRUE(at::allclose(got, want, tol, tol))
      << what << " max diff " << (got - want).abs().max().item<double>();
}

}  // namespace tessel::test_support
