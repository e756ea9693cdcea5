// Reads a Hugging Face tokenizer.json into a BpeTokenizerSpec (bpe_tokenizer.h
// lists what is supported and why the rest falls back to bytes).
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "data/bpe_tokenizer.h"

namespace tessel::data {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in)
    throw Error(fmt::format("cannot open {}: check the path and its permissions", path.string()));
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return json::parse(buffer.str());
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number overflow
    throw Error(fmt::format("{} is not valid JSON ({}); re-download or re-export it", path.string(),
                            e.what()));
  }
}

// Why a pre_tokenizer is unsupported ("" when it is supported); fills spec.
std::string read_pre_tokenizer(const json& pre, BpeTokenizerSpec& spec) {
  auto type_of = [](const json& j) { return j.is_object() ? j.value("type", "") : std::string(); };
  if (type_of(pre) == "ByteLevel") {
    spec.add_prefix_space = pre.value("add_prefix_space", false);
    if (pre.value("use_regex", true)) spec.split = SplitPattern::Gpt2;
    return "";
  }
  if (type_of(pre) != "Sequence" || !pre.contains("pretokenizers") ||
      pre["pretokenizers"].size() != 2) {
    return fmt::format("pre_tokenizer {} is not ByteLevel or Sequence[Split, ByteLevel]",
                       pre.is_null() ? "null" : type_of(pre));
  }
  const json& split = pre["pretokenizers"][0];
  const json& byte_level = pre["pretokenizers"][1];
  if (type_of(split) != "Split" || type_of(byte_level) != "ByteLevel") {
    return fmt::format("pre_tokenizer Sequence[{}, {}] is not Sequence[Split, ByteLevel]",
                       type_of(split), type_of(byte_level));
  }
  if (byte_level.value("use_regex", true)) return "ByteLevel after Split has use_regex true";
  spec.add_prefix_space = byte_level.value("add_prefix_space", false);
  if (split.value("behavior", "") != "Isolated" || split.value("invert", false)) {
    return "Split behavior is not Isolated (or invert is set)";
  }
  const json pattern = split.value("pattern", json::object());
  if (!pattern.contains("Regex") || !pattern["Regex"].is_string()) {
    return "Split pattern is not a Regex";
  }
  const std::string regex = pattern["Regex"].get<std::string>();
  spec.split = split_pattern_from_regex(regex);
  if (!spec.split) return fmt::format("Split regex '{}' is not one tessel implements", regex);
  return "";
}

// A special token named in tokenizer_config.json ("<s>" or {"content": "<s>"}).
std::optional<int64_t> config_token(const json& config, const char* key,
                                    const BpeTokenizerSpec& spec) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config[key];
  std::string content;
  if (v.is_string()) {
    content = v.get<std::string>();
  } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
    content = v["content"].get<std::string>();
  } else {
    return std::nullopt;
  }
  for (const auto& added : spec.added_tokens) {
    if (added.content == content) return added.id;
  }
  auto it = spec.vocab.find(content);
  if (it != spec.vocab.end()) return it->second;
  throw UsageError(
      fmt::format("{}: tokenizer_config.json names {} '{}', which is not a token of "
                  "tokenizer.json; fix or remove that entry",
                  spec.source, key, content));
}

// An id from config.json (an int, or a list whose first entry is used).
std::optional<int64_t> model_config_id(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& v = config[key];
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_array() && !v.empty() && v[0].is_number_integer()) return v[0].get<int64_t>();
  return std::nullopt;
}

void read_special_ids(const fs::path& dir, BpeTokenizerSpec& spec) {
  const json tokenizer_config = fs::exists(dir / "tokenizer_config.json")
                                    ? read_json(dir / "tokenizer_config.json")
                                    : json::object();
  const json model_config =
      fs::exists(dir / "config.json") ? read_json(dir / "config.json") : json::object();
  auto find = [&](const char* token_key, const char* id_key) -> std::optional<int64_t> {
    if (auto id = config_token(tokenizer_config, token_key, spec)) return id;
    return model_config_id(model_config, id_key);
  };
  const auto eos = find("eos_token", "eos_token_id");
  if (!eos) {
    throw UsageError(
        fmt::format("{}: no eos token: neither tokenizer_config.json (eos_token) nor config.json "
                    "(eos_token_id) beside it names one; add one of them",
                    spec.source));
  }
  spec.eos = *eos;
  spec.bos = find("bos_token", "bos_token_id").value_or(spec.eos);
  spec.pad = find("pad_token", "pad_token_id").value_or(spec.eos);
}

// read_bpe_tokenizer without its guard against unexpected JSON structure.
std::shared_ptr<BpeTokenizer> read_unguarded(const fs::path& dir, const json& root,
                                             BpeTokenizerSpec& spec, std::string& why_unsupported) {
  const json model = root.value("model", json::object());
  const std::string type = model.value("type", "");
  if (type != "BPE") {
    why_unsupported = fmt::format("model.type is '{}', not BPE", type);
    return nullptr;
  }
  if (model.value("byte_fallback", false)) {
    why_unsupported = "model.byte_fallback is true (a SentencePiece-style BPE)";
    return nullptr;
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty()) {
      why_unsupported = fmt::format("model.{} is set", key);
      return nullptr;
    }
  }
  const json normalizer = root.value("normalizer", json());
  if (!normalizer.is_null() && normalizer.value("type", "") != "NFC") {
    why_unsupported = fmt::format("normalizer {} is not supported (only null or NFC)",
                                  normalizer.value("type", "?"));
    return nullptr;
  }
  why_unsupported = read_pre_tokenizer(root.value("pre_tokenizer", json()), spec);
  if (!why_unsupported.empty()) return nullptr;

  spec.ignore_merges = model.value("ignore_merges", false);
  for (const auto& [token, id] : model.at("vocab").items()) spec.vocab[token] = id.get<int64_t>();
  for (const json& merge : model.at("merges")) {
    if (merge.is_string()) {
      const std::string s = merge.get<std::string>();
      const auto space = s.find(' ');
      TESSEL_CHECK(space != std::string::npos && s.find(' ', space + 1) == std::string::npos,
                   "{}: merge '{}' is not two tokens separated by one space", spec.source, s);
      spec.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else {
      TESSEL_CHECK(merge.is_array() && merge.size() == 2, "{}: merge {} is not a pair",
                   spec.source, merge.dump());
      spec.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    }
  }
  for (const json& added : root.value("added_tokens", json::array())) {
    spec.added_tokens.push_back({added.at("id").get<int64_t>(),
                                 added.at("content").get<std::string>(),
                                 added.value("special", false)});
  }
  read_special_ids(dir, spec);
  return std::make_shared<BpeTokenizer>(std::move(spec));
}

}  // namespace

std::shared_ptr<BpeTokenizer> read_bpe_tokenizer(const fs::path& dir,
                                                 std::string& why_unsupported) {
  const fs::path path = dir / "tokenizer.json";
  const json root = read_json(path);
  BpeTokenizerSpec spec;
  spec.source = path.string();
  // nlohmann throws on a value of an unexpected type anywhere (value() on a
  // number, at() of a missing key, get<int64_t>() of a string): one place
  // turns all of them into an error that names the file.
  try {
    return read_unguarded(dir, root, spec, why_unsupported);
  } catch (const json::exception& e) {
    throw Error(
        fmt::format("{}: unexpected structure ({}); is this a Hugging Face "
                    "tokenizer.json?",
                    spec.source, e.what()));
  }
}

}  // namespace tessel::data
