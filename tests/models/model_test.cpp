// Presets, tied embeddings, deterministic init, hooks on decoder layers,
// activation checkpointing on whole models, and save/load round trips.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "models/init.h"
#include "models/model_config.h"
#include "models/presets.h"
#include "models/pretrained.h"
#include "models/registry.h"
#include "support/temp_dir.h"

namespace tessel::models {
namespace {

using test_support::TempDir;

at::Tensor tokens(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed);
  return at::randint(vocab, {B, T}, gen, at::TensorOptions().dtype(at::kLong));
}

class Presets : public testing::TestWithParam<std::string> {};

TEST_P(Presets, BuildRunAndAreDeterministic) {
  auto a = create_preset_model(GetParam(), 7);
  auto b = create_preset_model(GetParam(), 7);
  auto c = create_preset_model(GetParam(), 8);
  int64_t numel = 0;
  auto pb = b->named_parameters(), pc = c->named_parameters();
  bool any_differs = false;
  for (const auto& p : a->named_parameters()) {
    numel += p.value().numel();
    EXPECT_TRUE(at::equal(p.value(), pb[p.key()])) << p.key();
    any_differs |= !at::equal(p.value(), pc[p.key()]);
  }
  EXPECT_TRUE(any_differs);
  EXPECT_GT(numel, 100'000);
  EXPECT_LT(numel, 1'000'000);

  at::Tensor ids = tokens(2, 20, 256, 1);
  at::Tensor logits = a->forward_logits(ids);
  EXPECT_EQ(logits.sizes(), (std::vector<int64_t>{2, 20, 256}));
  EXPECT_TRUE(logits.isfinite().all().item<bool>());
  // Default positions are 0..T-1. RoPE sees only relative positions: shifting
  // all of them changes nothing (up to rounding), spreading them out does.
  at::Tensor pos = at::arange(20, at::kLong);
  EXPECT_TRUE(at::equal(a->forward_logits(ids, pos.unsqueeze(0).expand({2, 20})), logits));
  const double d_shift = (a->forward_logits(ids, pos + 5) - logits).abs().max().item<double>();
  const double d_spread = (a->forward_logits(ids, pos * 7) - logits).abs().max().item<double>();
  EXPECT_LT(d_shift, 1e-5);
  EXPECT_GT(d_spread, 10 * d_shift);
  // Causal: changing the last token leaves earlier logits untouched.
  at::Tensor ids2 = ids.clone();
  ids2.select(1, 19).copy_(ids.select(1, 19).add(1).remainder(256));
  at::Tensor logits2 = a->forward_logits(ids2);
  EXPECT_TRUE(at::equal(logits2.narrow(1, 0, 19), logits.narrow(1, 0, 19)));
  EXPECT_FALSE(at::equal(logits2.narrow(1, 19, 1), logits.narrow(1, 19, 1)));
}

INSTANTIATE_TEST_SUITE_P(Tiny, Presets,
                         testing::Values("tiny-llama", "tiny-mistral", "tiny-qwen2", "tiny-qwen3",
                                         "tiny-gemma3"));

TEST(Presets, UnknownNameListsKnownOnesAndLlama100mIsAbout100M) {
  try {
    make_preset_config("tiny-gpt");
    FAIL();
  } catch (const UsageError& e) {
    std::string msg = e.what();
    for (const auto& n : preset_names()) EXPECT_NE(msg.find(n), std::string::npos) << msg;
  }
  BuildOptions meta;
  meta.device = c10::Device(c10::kMeta);
  auto big = build_model(parse_model_config(make_preset_config("llama-100m")), meta);
  int64_t numel = 0;
  for (const auto& p : big->parameters()) numel += p.numel();
  EXPECT_GT(numel, 90'000'000);
  EXPECT_LT(numel, 115'000'000);
}

TEST(TiedEmbeddings, OneTensorUsedOnBothSides) {
  auto model = create_preset_model("tiny-qwen2", 3);
  ASSERT_TRUE(model->tied());
  auto params = model->named_parameters();
  EXPECT_FALSE(params.contains("lm_head.weight"));
  EXPECT_EQ(model->lm_head()->weight().data_ptr(), model->embed_tokens()->weight().data_ptr());
  // logits = norm(h) @ E^T: perturbing the row of a token absent from the
  // input changes exactly that token's logit column.
  at::Tensor ids = tokens(1, 6, 256, 2).clamp_max(199);
  at::Tensor before = model->forward_logits(ids).detach();
  {
    at::NoGradGuard g;
    model->embed_tokens()->weight()[200].add_(1.0);
  }
  at::Tensor after = model->forward_logits(ids).detach();
  at::Tensor diff = (after - before).abs().amax({0, 1});
  EXPECT_GT(diff[200].item<double>(), 1e-3);
  diff[200] = 0;
  EXPECT_LT(diff.max().item<double>(), 1e-6);

  // Gradient of the single tensor has input- and output-side contributions.
  at::Tensor loss = model->forward_logits(ids).logsumexp(-1).sum();
  loss.backward();
  EXPECT_TRUE(model->embed_tokens()->weight().grad().defined());
}

TEST(DecoderLayers, HooksByPathSeeEveryLayerInOrder) {
  auto model = create_preset_model("tiny-gemma3", 1);
  std::vector<std::string> seen;
  for (auto& layer : model->decoder_layers()) {
    layer->add_pre_hook([&](nn::Module& m, nn::Tensors in) {
      seen.push_back(m.path());
      EXPECT_EQ(in.size(), 3u);  // hidden, cos, sin
      return in;
    });
  }
  // A post-hook on one projection, found by path, that zeroes its output.
  auto* o_proj = nn::find_module(*model, "model.layers.3.self_attn.o_proj");
  at::Tensor ids = tokens(1, 5, 256, 4);
  at::Tensor plain = model->forward_logits(ids);
  auto h = o_proj->add_post_hook([](nn::Module&, const nn::Tensors&, nn::Tensors out) {
    return nn::Tensors{out[0] * 0};
  });
  at::Tensor hooked = model->forward_logits(ids);
  o_proj->remove_hook(h);
  EXPECT_EQ(seen, (std::vector<std::string>{"model.layers.0", "model.layers.1", "model.layers.2",
                                            "model.layers.3", "model.layers.0", "model.layers.1",
                                            "model.layers.2", "model.layers.3"}));
  EXPECT_FALSE(at::allclose(plain, hooked, 1e-4, 1e-4));
  EXPECT_TRUE(at::equal(model->forward_logits(ids), plain));
}

TEST(ActivationCheckpointing, WholeModelGradientsMatch) {
  for (const char* preset : {"tiny-llama", "tiny-gemma3"}) {
    auto plain = create_preset_model(preset, 5);
    auto ckpt = create_preset_model(preset, 5);
    for (auto& layer : ckpt->decoder_layers()) layer->set_activation_checkpointing(true);
    at::Tensor ids = tokens(2, 9, 256, 6);
    at::Tensor labels = tokens(2, 9, 256, 7);
    for (auto& m : {plain, ckpt}) {
      at::Tensor logits = m->forward_logits(ids);
      at::cross_entropy_loss(logits.reshape({-1, 256}), labels.reshape({-1})).backward();
    }
    auto pg = plain->named_parameters();
    for (const auto& p : ckpt->named_parameters()) {
      ASSERT_TRUE(p.value().grad().defined()) << preset << " " << p.key();
      EXPECT_TRUE(at::allclose(p.value().grad(), pg[p.key()].grad(), 1e-5, 1e-7)) << preset << " " << p.key();
    }
  }
}

TEST(Pretrained, SaveThenLoadGivesTheSameModel) {
  for (const char* preset : {"tiny-llama", "tiny-qwen3", "tiny-gemma3"}) {
    TempDir dir;
    auto model = create_preset_model(preset, 9);
    save_pretrained(*model, dir.path());
    EXPECT_TRUE(std::filesystem::exists(dir.path() / "config.json"));
    auto loaded = load_pretrained(dir.path());
    EXPECT_EQ(loaded->config().architecture, model->config().architecture);
    auto lp = loaded->named_parameters();
    for (const auto& p : model->named_parameters()) EXPECT_TRUE(at::equal(p.value(), lp[p.key()])) << p.key();
    at::Tensor ids = tokens(1, 7, 256, 3);
    EXPECT_TRUE(at::equal(model->forward_logits(ids), loaded->forward_logits(ids)));
  }
}

TEST(Pretrained, ShapeMismatchNamesTensorAndShapes) {
  TempDir dir;
  auto model = create_preset_model("tiny-llama", 9);
  save_pretrained(*model, dir.path());
  // Claim a wider MLP in config.json than the weights have.
  nlohmann::json j;
  {
    std::ifstream in(dir.path() / "config.json");
    j = nlohmann::json::parse(in);
  }
  j["intermediate_size"] = 180;
  {
    std::ofstream out(dir.path() / "config.json");
    out << j.dump(2);
  }
  try {
    load_pretrained(dir.path());
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("model.layers.0.mlp.gate_proj.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[172, 64]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[180, 64]"), std::string::npos) << msg;
  }
  // Fewer layers in the config than in the checkpoint: the extra tensors are named.
  j["intermediate_size"] = 172;
  j["num_hidden_layers"] = 1;
  {
    std::ofstream out(dir.path() / "config.json");
    out << j.dump(2);
  }
  try {
    load_pretrained(dir.path());
    FAIL() << "expected an unexpected-tensor error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.1."), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessel::models
