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

#include "models/golden_data.h"
#include "models/pretrained.h"

namespace tessel::models {
namespace {

using namespace golden;

class Golden : public testing::TestWithParam<std::string> {};

TEST_P(Golden, LogitsLossAndGradientsMatchReference) {
  const auto dir = golden_dir(GetParam());
  const json golden = read_golden(dir);
  ASSERT_FALSE(golden.is_null());
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
