#include "models/pretrained.h"

#include <ATen/ATen.h>

#include <set>

#include "core/error.h"
#include "io/hf_checkpoint.h"
#include "io/hf_checkpoint_writer.h"
#include "io/safetensors_dtype.h"
#include "models/init.h"
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

}  // namespace

void check_checkpoint_tensors(const io::HfCheckpoint& ckpt,
                              const std::vector<std::pair<std::string, std::vector<int64_t>>>& expected,
                              const CausalLM& model) {
  const std::string where = ckpt.dir().string();
  std::set<std::string> used;
  for (const auto& [name, shape] : expected) {
    TESSEL_CHECK(ckpt.contains(name),
                 "checkpoint {} has no tensor '{}', which {} (config.json) needs; is the checkpoint "
                 "for a different architecture or size?",
                 where, name, model.config().architecture);
    const io::TensorInfo& info = ckpt.info(name);
    if (info.shape != shape) {
      throw Error(fmt::format("checkpoint {}: tensor '{}' has shape {} but config.json implies {}; "
                              "the weights do not match the config",
                              where, name, nn::shape_string(info.shape), nn::shape_string(shape)));
    }
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

void load_weights(CausalLM& model, const std::filesystem::path& dir) {
  io::HfCheckpoint ckpt = io::HfCheckpoint::open(dir);
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected;
  for (const auto& item : model.named_parameters()) {
    TESSEL_CHECK(!item.value().is_meta(), "cannot load weights into a model built on the meta device");
    expected.emplace_back(item.key(), item.value().sizes().vec());
  }
  check_checkpoint_tensors(ckpt, expected, model);
  at::NoGradGuard no_grad;
  for (auto& item : model.named_parameters()) item.value().copy_(ckpt.load(item.key()));
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
  if (!tensors.empty()) config.torch_dtype = io::torch_dtype_name(tensors.front().second.scalar_type());
  io::save_hf_checkpoint(dir, tensors, to_config_json(config), max_shard_bytes);
}

int64_t save_initialized(const ModelConfig& config, uint64_t seed, at::ScalarType dtype,
                         const std::filesystem::path& dir, uint64_t max_shard_bytes) {
  BuildOptions meta;
  meta.device = c10::Device(c10::kMeta);
  auto model = build_model(config, meta);
  const std::vector<ParamInit> recipe = init_recipe(*model);
  io::NamedTensors described;
  int64_t params = 0;
  for (const ParamInit& entry : recipe) {
    described.emplace_back(entry.name, at::empty(entry.shape, at::TensorOptions().dtype(dtype).device(at::kMeta)));
    params += described.back().second.numel();
  }
  // Every tensor has one dtype, so the writer asks for them in recipe order,
  // the order the generator must draw them in.
  InitialValues values(seed);
  size_t next = 0;
  auto produce = [&](const std::string& name, const at::Tensor&) {
    TESSEL_CHECK(next < recipe.size() && recipe[next].name == name,
                 "save_initialized: tensor '{}' asked for out of initialisation order", name);
    return values.next(recipe[next++]);
  };
  ModelConfig written = config;
  written.torch_dtype = io::torch_dtype_name(dtype);
  io::save_hf_checkpoint(dir, described, to_config_json(written), max_shard_bytes, produce);
  return params;
}

}  // namespace tessel::models
