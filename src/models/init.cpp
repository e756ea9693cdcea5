#include "models/init.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <map>

#include "core/error.h"
#include "nn/linear.h"
#include "nn/rms_norm.h"

namespace tessel::models {

namespace {

std::string param_name(const std::string& module_path, const char* name) {
  return module_path.empty() ? name : module_path + "." + name;
}

}  // namespace

std::vector<ParamInit> init_recipe(CausalLM& model, double std) {
  TESSEL_CHECK(std > 0, "init std must be positive, got {}", std);
  std::vector<ParamInit> recipe;
  auto add = [&](const std::string& path, const char* name, const at::Tensor& t, ParamInit::Kind kind, double v) {
    recipe.push_back(ParamInit{param_name(path, name), t.sizes().vec(), kind, v});
  };
  for (const auto& [path, module] : nn::named_tessel_modules(model)) {
    if (auto* lin = dynamic_cast<nn::Linear*>(module)) {
      if (lin->is_tied()) continue;  // the embedding owns the tensor
      add(path, "weight", lin->weight(), ParamInit::Kind::Normal, std);
      if (lin->bias().defined()) add(path, "bias", lin->bias(), ParamInit::Kind::Constant, 0.0);
    } else if (auto* emb = dynamic_cast<nn::Embedding*>(module)) {
      add(path, "weight", emb->weight(), ParamInit::Kind::Normal, std);
    } else if (auto* norm = dynamic_cast<nn::RMSNorm*>(module)) {
      add(path, "weight", norm->weight(), ParamInit::Kind::Constant, norm->identity_weight());
    }
  }
  return recipe;
}

InitialValues::InitialValues(uint64_t seed) : generator_(at::detail::createCPUGenerator(seed)) {}

at::Tensor InitialValues::next(const ParamInit& entry) {
  auto cpu32 = at::TensorOptions().dtype(at::kFloat);
  if (entry.kind == ParamInit::Kind::Normal) return at::normal(0.0, entry.value, entry.shape, generator_, cpu32);
  return at::full(entry.shape, entry.value, cpu32);
}

void init_weights(CausalLM& model, uint64_t seed, double std) {
  at::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> params;
  for (const auto& item : model.named_parameters()) params.emplace(item.key(), item.value());
  InitialValues values(seed);
  for (const ParamInit& entry : init_recipe(model, std)) {
    const at::Tensor& p = params.at(entry.name);
    TESSEL_CHECK(!p.is_meta(), "cannot initialise a model built on the meta device");
    p.copy_(values.next(entry));
  }
}

}  // namespace tessel::models
