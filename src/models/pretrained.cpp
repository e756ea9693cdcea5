#include "models/pretrained.h"

#include <ATen/ATen.h>

#include <set>

#include "core/error.h"
#include "io/hf_checkpoint.h"
#include "io/hf_checkpoint_writer.h"
#include "models/registry.h"
#include "nn/format.h"

namespace tessel::models {

namespace {

// Tensors some checkpoints carry that are derived, not learned (old Llama
// exports saved RoPE's inverse frequencies).
bool is_derived_buffer(const std::string& name) {
  const std::string suffix = "rotary_emb.inv_freq";
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "float32";
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    case at::kDouble: return "float64";
    default: return c10::toString(t);
  }
}

}  // namespace

void load_weights(CausalLM& model, const std::filesystem::path& dir) {
  io::HfCheckpoint ckpt = io::HfCheckpoint::open(dir);
  const std::string where = dir.string();
  at::NoGradGuard no_grad;
  std::set<std::string> used;
  for (auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    at::Tensor& param = item.value();
    TESSEL_CHECK(ckpt.contains(name),
                 "checkpoint {} has no tensor '{}', which {} (config.json) needs; is the checkpoint "
                 "for a different architecture or size?",
                 where, name, model.config().architecture);
    const io::TensorInfo& info = ckpt.info(name);
    if (c10::IntArrayRef(info.shape) != param.sizes()) {
      throw Error(fmt::format("checkpoint {}: tensor '{}' has shape {} but config.json implies {}; "
                              "the weights do not match the config",
                              where, name, nn::shape_string(info.shape), nn::shape_string(param.sizes())));
    }
    TESSEL_CHECK(!param.is_meta(), "cannot load weights into a model built on the meta device");
    param.copy_(ckpt.load(name));
    used.insert(name);
  }
  for (const auto& [alias, canonical] : model.tied_parameter_names()) used.insert(alias);
  std::vector<std::string> unexpected;
  for (const auto& name : ckpt.names()) {
    if (!used.count(name) && !is_derived_buffer(name)) unexpected.push_back(name);
  }
  if (!unexpected.empty()) {
    std::string list;
    for (std::size_t i = 0; i < std::min<std::size_t>(unexpected.size(), 5); ++i) {
      list += (i ? ", " : "") + unexpected[i];
    }
    throw Error(fmt::format("checkpoint {} has {} tensor(s) that {} built from config.json does not have "
                            "(e.g. {}); check config.json (num_hidden_layers, tie_word_embeddings, "
                            "biases) against the weights",
                            where, unexpected.size(), model.config().architecture, list));
  }
}

std::shared_ptr<CausalLM> load_pretrained(const std::filesystem::path& dir, const BuildOptions& options) {
  ModelConfig config = load_model_config(dir);
  auto model = build_model(config, options);
  load_weights(*model, dir);
  return model;
}

std::vector<std::pair<std::string, at::Tensor>> hf_state_dict(const CausalLM& model) {
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& item : model.named_parameters()) {
    tensors.emplace_back(item.key(), item.value().detach().to(at::kCPU).contiguous());
  }
  return tensors;
}

void save_pretrained(const CausalLM& model, const std::filesystem::path& dir, uint64_t max_shard_bytes) {
  auto tensors = hf_state_dict(model);
  ModelConfig config = model.config();
  if (!tensors.empty()) config.torch_dtype = dtype_name(tensors.front().second.scalar_type());
  io::save_hf_checkpoint(dir, tensors, to_config_json(config), max_shard_bytes);
}

}  // namespace tessel::models
