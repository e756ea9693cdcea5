#include "models/model_config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace tessel::models {

namespace {

using nlohmann::json;

// Reads typed fields of one JSON object, naming key and file on every error.
class Reader {
 public:
  Reader(const json& j, const std::string& source) : j_(j), source_(source) {}

  bool has(const char* key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  bool present(const char* key) const { return j_.contains(key); }

  [[noreturn]] void fail(const char* key, const std::string& what) const {
    throw UsageError(fmt::format("{}: key '{}' {}", source_, key, what));
  }

  int64_t integer(const char* key) const {
    if (!j_.contains(key)) fail(key, "is required but missing");
    const json& v = j_.at(key);
    if (v.is_number_integer()) return v.get<int64_t>();
    if (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>()))) {
      return static_cast<int64_t>(v.get<double>());
    }
    fail(key, fmt::format("must be an integer, got {}", v.dump()));
  }
  int64_t integer(const char* key, int64_t fallback) const { return has(key) ? integer(key) : fallback; }
  std::optional<int64_t> optional_integer(const char* key) const {
    return has(key) ? std::optional<int64_t>(integer(key)) : std::nullopt;
  }
  int64_t positive(const char* key) const {
    int64_t v = integer(key);
    if (v <= 0) fail(key, fmt::format("must be positive, got {}", v));
    return v;
  }

  double number(const char* key) const {
    if (!j_.contains(key)) fail(key, "is required but missing");
    const json& v = j_.at(key);
    if (!v.is_number()) fail(key, fmt::format("must be a number, got {}", v.dump()));
    return v.get<double>();
  }
  double number(const char* key, double fallback) const { return has(key) ? number(key) : fallback; }
  std::optional<double> optional_number(const char* key) const {
    return has(key) ? std::optional<double>(number(key)) : std::nullopt;
  }

  bool boolean(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_boolean()) fail(key, fmt::format("must be true or false, got {}", v.dump()));
    return v.get<bool>();
  }

  std::string string(const char* key, const std::string& fallback) const {
    if (!has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_string()) fail(key, fmt::format("must be a string, got {}", v.dump()));
    return v.get<std::string>();
  }

 private:
  const json& j_;
  const std::string& source_;
};

std::optional<nn::RopeScaling> parse_rope_scaling(const json& j, const std::string& where) {
  if (j.is_null()) return std::nullopt;
  if (!j.is_object()) throw UsageError(fmt::format("{} must be an object or null, got {}", where, j.dump()));
  Reader r(j, where);
  std::string type = r.string("rope_type", r.string("type", ""));
  if (type.empty()) r.fail("rope_type", "is required in rope_scaling (e.g. \"llama3\" or \"linear\")");
  if (type == "default") return std::nullopt;
  nn::RopeScaling s;
  s.type = type;
  if (type == "linear") {
    s.factor = r.number("factor");
  } else if (type == "llama3") {
    s.factor = r.number("factor");
    s.low_freq_factor = r.number("low_freq_factor");
    s.high_freq_factor = r.number("high_freq_factor");
    s.original_max_position_embeddings = r.number("original_max_position_embeddings");
  } else {
    throw UsageError(fmt::format(
        "{}: rope_scaling type '{}' is not supported (supported: default, linear, llama3)", where, type));
  }
  return s;
}

json rope_scaling_json(const std::optional<nn::RopeScaling>& s) {
  if (!s) return nullptr;
  json j = {{"rope_type", s->type}, {"factor", s->factor}};
  if (s->type == "llama3") {
    j["low_freq_factor"] = s->low_freq_factor;
    j["high_freq_factor"] = s->high_freq_factor;
    j["original_max_position_embeddings"] = static_cast<int64_t>(s->original_max_position_embeddings);
  }
  return j;
}

bool is_gemma3(const ModelConfig& c) { return c.model_type == "gemma3_text" || c.model_type == "gemma3"; }
bool is_qwen3_moe(const ModelConfig& c) {
  return c.model_type == "qwen3_moe" || (c.model_type.empty() && c.architecture == "Qwen3MoeForCausalLM");
}
bool is_mixtral(const ModelConfig& c) {
  return c.model_type == "mixtral" || (c.model_type.empty() && c.architecture == "MixtralForCausalLM");
}

// The expert fields of Qwen3MoeConfig / MixtralConfig, with their defaults.
void parse_moe_fields(const json& j, const Reader& r, ModelConfig& c) {
  const bool qwen3_moe = is_qwen3_moe(c);
  if (!qwen3_moe && !is_mixtral(c)) return;
  if (qwen3_moe) {
    c.num_experts = r.integer("num_experts", 128);
    c.num_experts_per_tok = r.integer("num_experts_per_tok", 8);
    c.moe_intermediate_size = r.integer("moe_intermediate_size", 768);
    c.decoder_sparse_step = r.integer("decoder_sparse_step", 1);
    c.norm_topk_prob = r.boolean("norm_topk_prob", false);
    if (r.has("mlp_only_layers")) {
      const json& layers = j.at("mlp_only_layers");
      if (!layers.is_array()) r.fail("mlp_only_layers", fmt::format("must be a list of layer indices, got {}", layers.dump()));
      for (const auto& l : layers) {
        if (!l.is_number_integer() || l.get<int64_t>() < 0 || l.get<int64_t>() >= c.num_hidden_layers) {
          r.fail("mlp_only_layers", fmt::format("entries must be layer indices in [0, {}) (num_hidden_layers), got {}",
                                                c.num_hidden_layers, l.dump()));
        }
        c.mlp_only_layers.push_back(l.get<int64_t>());
      }
    }
    if (c.num_experts < 0) r.fail("num_experts", fmt::format("must be 0 (dense) or positive, got {}", c.num_experts));
    if (c.decoder_sparse_step <= 0) {
      r.fail("decoder_sparse_step", fmt::format("must be positive, got {} (1 = every layer sparse)", c.decoder_sparse_step));
    }
  } else {
    c.num_experts = r.integer("num_local_experts", 8);
    c.num_experts_per_tok = r.integer("num_experts_per_tok", 2);
    c.moe_intermediate_size = c.intermediate_size;
    c.norm_topk_prob = true;  // Mixtral always renormalises its top-k weights
    if (c.num_experts <= 0) r.fail("num_local_experts", fmt::format("must be positive, got {}", c.num_experts));
    const double jitter = r.number("router_jitter_noise", 0.0);
    if (jitter != 0.0) {
      r.fail("router_jitter_noise", fmt::format("is {}: tessel routes deterministically (HF multiplies the router "
                                                "input by random noise in training); set it to 0.0",
                                                jitter));
    }
  }
  if (c.num_experts > 0 && (c.num_experts_per_tok < 1 || c.num_experts_per_tok > c.num_experts)) {
    r.fail("num_experts_per_tok", fmt::format("must be between 1 and the number of experts ({}), got {}",
                                              c.num_experts, c.num_experts_per_tok));
  }
  if (c.num_experts > 0 && c.moe_intermediate_size <= 0) {
    r.fail("moe_intermediate_size", fmt::format("must be positive, got {}", c.moe_intermediate_size));
  }
  c.output_router_logits = r.boolean("output_router_logits", false);
  c.router_aux_loss_coef = r.number("router_aux_loss_coef", 0.001);
}

}  // namespace

ModelConfig parse_model_config(const std::string& json_text, const std::string& source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number overflow
    throw UsageError(fmt::format("{} is not valid JSON: {}", source, e.what()));
  }
  if (!j.is_object()) throw UsageError(fmt::format("{} must hold a JSON object", source));
  Reader r(j, source);
  ModelConfig c;
  c.json_text = json_text;
  c.source = source;

  if (!j.contains("architectures")) r.fail("architectures", "is required but missing (e.g. [\"LlamaForCausalLM\"])");
  const json& archs = j.at("architectures");
  if (!archs.is_array() || archs.empty() || !archs[0].is_string()) {
    r.fail("architectures", fmt::format("must be a non-empty list of strings, got {}", archs.dump()));
  }
  c.architecture = archs[0].get<std::string>();
  c.model_type = r.string("model_type", "");
  const bool gemma = is_gemma3(c) || c.architecture.rfind("Gemma3", 0) == 0;

  c.vocab_size = r.positive("vocab_size");
  c.hidden_size = r.positive("hidden_size");
  c.intermediate_size = r.positive("intermediate_size");
  c.num_hidden_layers = r.positive("num_hidden_layers");
  c.num_attention_heads = r.positive("num_attention_heads");
  c.num_key_value_heads = r.integer("num_key_value_heads", c.num_attention_heads);
  if (c.num_key_value_heads <= 0 || c.num_attention_heads % c.num_key_value_heads != 0) {
    r.fail("num_key_value_heads", fmt::format("({}) must be positive and divide num_attention_heads ({})",
                                              c.num_key_value_heads, c.num_attention_heads));
  }
  if (r.has("head_dim")) {
    c.head_dim = r.positive("head_dim");
  } else if (gemma) {
    c.head_dim = 256;  // Gemma3TextConfig default
  } else {
    if (c.hidden_size % c.num_attention_heads != 0) {
      r.fail("head_dim", fmt::format("is absent and hidden_size {} is not divisible by num_attention_heads {}",
                                     c.hidden_size, c.num_attention_heads));
    }
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) r.fail("head_dim", fmt::format("must be even for rotary embeddings, got {}", c.head_dim));
  c.max_position_embeddings = r.integer("max_position_embeddings", 0);

  c.rms_norm_eps = r.number("rms_norm_eps", 1e-6);
  c.rope_theta = r.number("rope_theta", gemma ? 1e6 : 10000.0);
  if (j.contains("rope_scaling")) c.rope_scaling = parse_rope_scaling(j.at("rope_scaling"), source + " rope_scaling");
  c.rope_local_base_freq = r.number("rope_local_base_freq", 10000.0);
  // transformers v5 folds RoPE settings into rope_parameters (per layer type for Gemma3).
  if (r.has("rope_parameters") && !r.has("rope_theta")) {
    const json& rp = j.at("rope_parameters");
    auto apply_full = [&](const json& p, const std::string& where) {
      Reader pr(p, where);
      c.rope_theta = pr.number("rope_theta", c.rope_theta);
      c.rope_scaling = parse_rope_scaling(p, where);
    };
    if (rp.contains("full_attention")) {
      apply_full(rp.at("full_attention"), source + " rope_parameters.full_attention");
      if (rp.contains("sliding_attention")) {
        c.rope_local_base_freq = Reader(rp.at("sliding_attention"), source + " rope_parameters.sliding_attention")
                                     .number("rope_theta", c.rope_local_base_freq);
      }
    } else {
      apply_full(rp, source + " rope_parameters");
    }
  }

  c.tie_word_embeddings = r.boolean("tie_word_embeddings", gemma);
  c.attention_bias = r.boolean("attention_bias", false);
  c.mlp_bias = r.boolean("mlp_bias", false);
  c.hidden_act = gemma ? r.string("hidden_activation", r.string("hidden_act", "gelu_pytorch_tanh"))
                       : r.string("hidden_act", "silu");

  if (j.contains("sliding_window")) {
    c.sliding_window = r.optional_integer("sliding_window");
  } else if (gemma || c.model_type == "mistral") {
    c.sliding_window = 4096;  // Gemma3TextConfig / MistralConfig default
  }
  if (c.sliding_window && *c.sliding_window <= 0) {
    r.fail("sliding_window", fmt::format("must be positive or null, got {}", *c.sliding_window));
  }
  c.use_sliding_window = r.boolean("use_sliding_window", false);
  c.max_window_layers = r.integer("max_window_layers", c.num_hidden_layers);
  c.sliding_window_pattern = r.integer("sliding_window_pattern", r.integer("_sliding_window_pattern", 6));
  if (c.sliding_window_pattern <= 0) {
    r.fail("sliding_window_pattern", fmt::format("must be positive, got {}", c.sliding_window_pattern));
  }
  if (r.has("layer_types")) {
    const json& lt = j.at("layer_types");
    if (!lt.is_array() || static_cast<int64_t>(lt.size()) != c.num_hidden_layers) {
      r.fail("layer_types", fmt::format("must be a list of num_hidden_layers ({}) strings", c.num_hidden_layers));
    }
    for (const auto& t : lt) {
      if (!t.is_string() || (t != "sliding_attention" && t != "full_attention")) {
        r.fail("layer_types", fmt::format("entries must be \"sliding_attention\" or \"full_attention\", got {}",
                                          t.dump()));
      }
      c.layer_types.push_back(t.get<std::string>());
    }
  }

  if (gemma) c.query_pre_attn_scalar = r.number("query_pre_attn_scalar", 256.0);
  c.final_logit_softcapping = r.optional_number("final_logit_softcapping");
  c.attn_logit_softcapping = r.optional_number("attn_logit_softcapping");
  parse_moe_fields(j, r, c);
  c.torch_dtype = r.string("torch_dtype", r.string("dtype", ""));
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& path) {
  std::filesystem::path file = std::filesystem::is_directory(path) ? path / "config.json" : path;
  std::ifstream in(file);
  if (!in) {
    throw UsageError(fmt::format("cannot read {}: {}", file.string(),
                                 std::filesystem::exists(file) ? "permission denied or not a file"
                                                               : "no such file"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return parse_model_config(text.str(), file.string());
}

std::string to_config_json(const ModelConfig& c) {
  json j = c.json_text.empty() ? json::object() : json::parse(c.json_text);
  const bool gemma = is_gemma3(c);
  j["architectures"] = json::array({c.architecture});
  if (!c.model_type.empty()) j["model_type"] = c.model_type;
  j["vocab_size"] = c.vocab_size;
  j["hidden_size"] = c.hidden_size;
  j["intermediate_size"] = c.intermediate_size;
  j["num_hidden_layers"] = c.num_hidden_layers;
  j["num_attention_heads"] = c.num_attention_heads;
  j["num_key_value_heads"] = c.num_key_value_heads;
  if (j.contains("head_dim") || gemma || c.head_dim * c.num_attention_heads != c.hidden_size) {
    j["head_dim"] = c.head_dim;
  }
  if (c.max_position_embeddings > 0) j["max_position_embeddings"] = c.max_position_embeddings;
  j["rms_norm_eps"] = c.rms_norm_eps;
  j["rope_theta"] = c.rope_theta;
  if (j.contains("rope_scaling") || c.rope_scaling) j["rope_scaling"] = rope_scaling_json(c.rope_scaling);
  j["tie_word_embeddings"] = c.tie_word_embeddings;
  if (j.contains("attention_bias") || c.attention_bias) j["attention_bias"] = c.attention_bias;
  if (j.contains("mlp_bias") || c.mlp_bias) j["mlp_bias"] = c.mlp_bias;
  j[gemma ? "hidden_activation" : "hidden_act"] = c.hidden_act;
  if (j.contains("sliding_window") || c.sliding_window) {
    j["sliding_window"] = c.sliding_window ? json(*c.sliding_window) : json(nullptr);
  }
  if (j.contains("use_sliding_window") || c.use_sliding_window) j["use_sliding_window"] = c.use_sliding_window;
  if (!c.layer_types.empty()) j["layer_types"] = c.layer_types;
  if (gemma) {
    j["sliding_window_pattern"] = c.sliding_window_pattern;
    j["rope_local_base_freq"] = c.rope_local_base_freq;
    j["query_pre_attn_scalar"] = c.query_pre_attn_scalar.value_or(256.0);
  }
  if (j.contains("final_logit_softcapping") || c.final_logit_softcapping) {
    j["final_logit_softcapping"] = c.final_logit_softcapping ? json(*c.final_logit_softcapping) : json(nullptr);
  }
  if (j.contains("attn_logit_softcapping") || c.attn_logit_softcapping) {
    j["attn_logit_softcapping"] = c.attn_logit_softcapping ? json(*c.attn_logit_softcapping) : json(nullptr);
  }
  if (is_qwen3_moe(c)) {
    j["num_experts"] = c.num_experts;
    j["moe_intermediate_size"] = c.moe_intermediate_size;
    j["decoder_sparse_step"] = c.decoder_sparse_step;
    j["mlp_only_layers"] = c.mlp_only_layers;
    j["norm_topk_prob"] = c.norm_topk_prob;
  } else if (is_mixtral(c)) {
    j["num_local_experts"] = c.num_experts;
  }
  if (is_qwen3_moe(c) || is_mixtral(c)) {
    j["num_experts_per_tok"] = c.num_experts_per_tok;
    j["output_router_logits"] = c.output_router_logits;
    j["router_aux_loss_coef"] = c.router_aux_loss_coef;
  }
  if (!c.torch_dtype.empty()) j["torch_dtype"] = c.torch_dtype;
  return j.dump(2) + "\n";
}

bool gemma3_is_global_layer(const ModelConfig& c, int64_t layer) {
  if (!c.layer_types.empty()) return c.layer_types.at(static_cast<std::size_t>(layer)) == "full_attention";
  return (layer + 1) % c.sliding_window_pattern == 0;
}

bool is_moe(const ModelConfig& c) { return c.num_experts > 0; }

bool is_moe_layer(const ModelConfig& c, int64_t layer) {
  if (!is_moe(c)) return false;
  for (int64_t dense : c.mlp_only_layers) {
    if (dense == layer) return false;
  }
  return (layer + 1) % c.decoder_sparse_step == 0;
}

std::optional<int64_t> layer_sliding_window(const ModelConfig& c, int64_t layer) {
  if (!c.sliding_window) return std::nullopt;
  if (is_gemma3(c)) return gemma3_is_global_layer(c, layer) ? std::nullopt : c.sliding_window;
  // Mixtral as Mistral; Qwen3-MoE's window, when switched on, covers every layer.
  if (c.model_type == "mistral" || c.model_type == "mixtral") return c.sliding_window;
  if (c.model_type == "qwen3_moe") return c.use_sliding_window ? c.sliding_window : std::nullopt;
  if (c.model_type == "qwen2" || c.model_type == "qwen3") {
    if (!c.use_sliding_window) return std::nullopt;
    if (!c.layer_types.empty()) {
      return c.layer_types.at(static_cast<std::size_t>(layer)) == "sliding_attention" ? c.sliding_window
                                                                                     : std::nullopt;
    }
    return layer >= c.max_window_layers ? c.sliding_window : std::nullopt;
  }
  return std::nullopt;  // Llama: full causal attention
}

}  // namespace tessel::models
