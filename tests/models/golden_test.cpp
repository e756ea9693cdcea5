// The models against the independent float64 reference of tests/golden
// (README there): logits, loss, gradient norms and gradient samples of small
// random models, one case per family feature. Run in fp32, with and without
// activation checkpointing.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/pretrained.h"
#include "support/source_tree.h"

namespace tessel::models {
namespace {

using nlohmann::json;

std::filesystem::path golden_dir(const std::string& name) {
  return test_support::source_tree() / "tests" / "golden" / name;
}

at::Tensor to_tensor(const json& nested, at::ScalarType dtype) {
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
void expect_close(const at::Tensor& got, const at::Tensor& want, double rtol, double atol,
                  const std::string& what) {
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
  at::Tensor excess = (g - w).abs() - (w.abs() * rtol + atol);
  const int64_t worst = excess.flatten().argmax().item<int64_t>();
  EXPECT_LE(excess.flatten()[worst].item<double>(), 0.0)
      << what << ": element " << worst << " is " << g.flatten()[worst].item<double>() << ", reference "
      << w.flatten()[worst].item<double>();
}

class Golden : public testing::TestWithParam<std::string> {};

TEST_P(Golden, LogitsLossAndGradientsMatchReference) {
  const auto dir = golden_dir(GetParam());
  std::ifstream in(dir / "golden.json");
  ASSERT_TRUE(in) << "missing " << (dir / "golden.json") << " (regenerate with tests/golden/generate.py)";
  const json golden = json::parse(in);
  const at::Tensor ids = to_tensor(golden["tokens"], at::kLong);
  const at::Tensor labels = to_tensor(golden["labels"], at::kLong);
  const at::Tensor want_logits = to_tensor(golden["logits"], at::kDouble);
  const double want_loss = golden["loss"];
  const int64_t ignore_index = golden["ignore_index"];

  for (bool checkpointing : {false, true}) {
    SCOPED_TRACE(checkpointing ? "with activation checkpointing" : "plain");
    auto model = load_pretrained(dir);
    for (auto& layer : model->decoder_layers()) layer->set_activation_checkpointing(checkpointing);
    at::Tensor logits = model->forward_logits(ids);
    ASSERT_EQ(logits.scalar_type(), at::kFloat);
    // Reference fp32 noise is <= 3.3e-6 on O(1) logits (golden README).
    expect_close(logits, want_logits, 1e-5, 1e-5, "logits");

    const int64_t V = logits.size(-1);
    at::Tensor loss = at::cross_entropy_loss(logits.view({-1, V}), labels.view({-1}), {},
                                             at::Reduction::Mean, ignore_index);
    EXPECT_NEAR(loss.item<double>(), want_loss, 1e-5 * std::abs(want_loss));
    loss.backward();

    auto params = model->named_parameters();
    ASSERT_EQ(params.size(), golden["grad_norms"].size());
    for (const auto& [name, norm] : golden["grad_norms"].items()) {
      ASSERT_TRUE(params.contains(name)) << "model has no parameter " << name;
      at::Tensor grad = params[name].grad();
      ASSERT_TRUE(grad.defined()) << name << " got no gradient";
      const double want = norm.get<double>();
      EXPECT_NEAR(grad.to(at::kDouble).norm().item<double>(), want, 1e-5 * want + 1e-9) << name;
      expect_close(grad.flatten().narrow(0, 0, 4), to_tensor(golden["grad_samples"][name], at::kDouble),
                   1e-4, 1e-6, "grad sample of " + name);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Families, Golden,
                         testing::Values("llama", "llama3_rope_scaling", "llama_tied", "mistral", "qwen2",
                                         "qwen3", "gemma3", "gemma3_softcap"));

}  // namespace
}  // namespace tessel::models
