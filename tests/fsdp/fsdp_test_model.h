// A tiny decoder-style language model built from tessel::nn::Modules, for the
// FSDP parity tests: a token embedding (vocab 4W+1) tied to the output
// projection, decoder layers whose Linear dims 15 -> 17 -> 7 -> 15 do not
// divide by the world size, a final norm. Plus the single-process training
// loop both the reference and the sharded runs use.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "nn/module.h"

namespace tessel::fsdp::testing {

inline constexpr int64_t kHidden = 15;

class Embedding : public nn::Module {
 public:
  Embedding(int64_t vocab, int64_t hidden) : nn::Module("Embedding") {
    register_parameter("weight", at::randn({vocab, hidden}) * 0.5);
  }

 protected:
  nn::Tensors forward(const nn::Tensors& in) override {
    return {at::embedding(parameter("weight"), in[0])};
  }
};

// Output projection whose weight is the embedding's (same tensor).
class TiedHead : public nn::Module {
 public:
  explicit TiedHead(const at::Tensor& weight) : nn::Module("TiedHead") {
    register_parameter("weight", weight);
  }

 protected:
  nn::Tensors forward(const nn::Tensors& in) override {
    return {at::matmul(in[0], parameter("weight").t())};
  }
};

class Linear : public nn::Module {
 public:
  Linear(int64_t in, int64_t out) : nn::Module("Linear") {
    register_parameter("weight", at::randn({out, in}) / std::sqrt(static_cast<double>(in)));
    register_parameter("bias", at::randn({out}) * 0.1);
  }

 protected:
  nn::Tensors forward(const nn::Tensors& in) override {
    return {at::linear(in[0], parameter("weight"), parameter("bias"))};
  }
};

class Norm : public nn::Module {
 public:
  explicit Norm(int64_t hidden) : nn::Module("Norm") {
    register_parameter("weight", at::ones({hidden}) + at::randn({hidden}) * 0.1);
  }

 protected:
  nn::Tensors forward(const nn::Tensors& in) override {
    const at::Tensor& x = in[0];
    return {x * at::rsqrt(x.pow(2).mean({-1}, true) + 1e-6) * parameter("weight")};
  }
};

class DecoderLayer : public nn::Module {
 public:
  DecoderLayer() : nn::Module("DecoderLayer") {
    norm_ = register_module("norm", std::make_shared<Norm>(kHidden));
    up_ = register_module("up", std::make_shared<Linear>(kHidden, 17));
    mid_ = register_module("mid", std::make_shared<Linear>(17, 7));
    down_ = register_module("down", std::make_shared<Linear>(7, kHidden));
  }

 protected:
  nn::Tensors forward(const nn::Tensors& in) override {
    at::Tensor h = norm_->call(in[0]);
    h = at::tanh(up_->call(h));
    h = at::tanh(mid_->call(h));
    return {in[0] + down_->call(h)};
  }

 private:
  std::shared_ptr<Norm> norm_;
  std::shared_ptr<Linear> up_, mid_, down_;
};

class TinyLM : public nn::Module {
 public:
  TinyLM(int64_t vocab, int num_layers) : nn::Module("TinyLM") {
    embed_tokens_ = register_module("embed_tokens", std::make_shared<Embedding>(vocab, kHidden));
    layers_ = register_module("layers", std::make_shared<nn::ModuleList>());
    for (int i = 0; i < num_layers; ++i) layers_->push_back(std::make_shared<DecoderLayer>());
    norm_ = register_module("norm", std::make_shared<Norm>(kHidden));
    lm_head_ =
        register_module("lm_head", std::make_shared<TiedHead>(embed_tokens_->parameter("weight")));
  }
  const std::vector<std::shared_ptr<nn::Module>>& decoder_layers() const {
    return layers_->items();
  }
  nn::Module& embed_tokens() { return *embed_tokens_; }
  nn::Module& lm_head() { return *lm_head_; }

 protected:
  nn::Tensors forward(const nn::Tensors& in) override {
    at::Tensor h = embed_tokens_->call(in[0]);
    for (const auto& layer : layers_->items()) h = layer->call(h);
    return {lm_head_->call(norm_->call(h))};
  }

 private:
  std::shared_ptr<Embedding> embed_tokens_;
  std::shared_ptr<nn::ModuleList> layers_;
  std::shared_ptr<Norm> norm_;
  std::shared_ptr<TiedHead> lm_head_;
};

inline std::shared_ptr<TinyLM> make_model(int64_t vocab, int num_layers, uint64_t seed) {
  at::manual_seed(seed);
  auto model = std::make_shared<TinyLM>(vocab, num_layers);
  nn::assign_module_paths(*model);
  return model;
}

// Parameters once each (the tied weight is registered twice).
inline std::vector<at::Tensor> unique_parameters(torch::nn::Module& m) {
  std::vector<at::Tensor> out;
  std::unordered_set<const void*> seen;
  for (const auto& p : m.parameters()) {
    if (seen.insert(p.unsafeGetTensorImpl()).second) out.push_back(p);
  }
  return out;
}

// Token ids [2, 6] of one (step, microbatch, dp rank): the same on every rank.
inline at::Tensor batch(int64_t vocab, int step, int micro, int dp_rank) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(
      static_cast<uint64_t>(1000003 * step + 1009 * micro + dp_rank + 17));
  return at::randint(vocab, {2, 6}, gen, at::TensorOptions().dtype(at::kLong));
}

// Next-token cross-entropy (mean over tokens), in fp32.
inline at::Tensor lm_loss(const at::Tensor& logits, const at::Tensor& ids) {
  const int64_t vocab = logits.size(-1);
  at::Tensor pred = logits.narrow(1, 0, ids.size(1) - 1).reshape({-1, vocab}).to(at::kFloat);
  at::Tensor target = ids.narrow(1, 1, ids.size(1) - 1).reshape({-1});
  return at::nll_loss(at::log_softmax(pred, -1), target);
}

}  // namespace tessel::fsdp::testing
