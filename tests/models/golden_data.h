// Reading tests/golden/<case>/golden.json (README there) and comparing
// tensors against it: shared by the golden tests of the dense families
// (golden_test.cpp) and the mixture-of-experts ones (moe_golden_test.cpp).
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/source_tree.h"

namespace tessel::models::golden {

using nlohmann::json;

using test_support::golden_dir;

inline at::Tensor to_tensor(const json& nested, at::ScalarType dtype) {
  std::vector<int64_t> shape;
  const json* j = &nested;
  while (j->is_array()) {
    shape.push_back(static_cast<int64_t>(j->size()));
    j = &(*j)[0];
  }
  std::vector<double> flat;
  std::function<void(const json&)> walk = [&](const json& x) {
    if (x.is_array()) {
      for (const auto& e : x) walk(e);
    } else {
      flat.push_back(x.get<double>());
    }
  };
  walk(nested);
  return at::tensor(flat, at::kDouble).view(shape).to(dtype);
}

// |got - want| <= rtol * |want| + atol, reporting the worst element.
inline void expect_close(const at::Tensor& got, const at::Tensor& want, double rtol, double atol,
                  const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
  at::Tensor excess = (g - w).abs() - (w.abs() * rtol + atol);
  const int64_t worst = excess.flatten().argmax().item<int64_t>();
  EXPECT_LE(excess.flatten()[worst].item<double>(), 0.0)
      << what << ": element " << worst << " is " << g.flatten()[worst].item<double>() << ", reference "
      << w.flatten()[worst].item<double>();
}

inline json read_golden(const std::filesystem::path& dir) {
  std::ifstream in(dir / "golden.json");
  EXPECT_TRUE(in) << "missing " << (dir / "golden.json") << " (regenerate with tests/golden/generate*.py)";
  return in ? json::parse(in) : json();
}

}  // namespace tessel::models::golden
