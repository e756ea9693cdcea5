#include "train/model_files.h"

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <optional>

#include "core/error.h"
#include "io/atomic_file.h"

namespace tessel::train {

namespace fs = std::filesystem;

namespace {

const char* const kGenerationConfig = "generation_config.json";

// A directory the run names, absolute; "" for a preset name (not a directory).
std::string directory_or_empty(const std::string& name) {
  std::error_code ec;
  if (name.empty() || !fs::is_directory(name, ec)) return "";
  return fs::absolute(name).lexically_normal().string();
}

}  // namespace

const std::vector<std::string>& carried_model_file_names() {
  static const std::vector<std::string> names = {
      "tokenizer.json",    "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
      "vocab.json",        "merges.txt",            "tokenizer.model",         "chat_template.jinja",
      "chat_template.json", kGenerationConfig};
  return names;
}

ModelFileSources model_file_sources(const config::Config& run_config) {
  const std::string model = run_config.get_or<std::string>("policy.model_name", "");
  const auto tokenizer = run_config.get_or<std::optional<std::string>>("policy.tokenizer.name", std::nullopt);
  return {directory_or_empty(model), directory_or_empty(tokenizer.value_or(model))};
}

std::map<std::string, fs::path> find_model_files(const ModelFileSources& sources) {
  std::map<std::string, fs::path> found;
  for (const std::string& name : carried_model_file_names()) {
    const std::string& dir = name == kGenerationConfig ? sources.model_dir : sources.tokenizer_dir;
    std::error_code ec;
    if (!dir.empty() && fs::is_regular_file(fs::path(dir) / name, ec)) found[name] = fs::path(dir) / name;
  }
  return found;
}

std::map<std::string, io::FileDigest> copy_model_files(const std::map<std::string, fs::path>& files,
                                                       const fs::path& dir) {
  std::map<std::string, io::FileDigest> written;
  for (const auto& [name, from] : files) {
    std::ifstream in(from, std::ios::binary);
    if (!in) throw Error(fmt::format("cannot read {} to carry it with the model: check its permissions", from.string()));
    const std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) throw Error(fmt::format("cannot read {} to carry it with the model", from.string()));
    written[name] = io::write_file_atomically(dir / name, content);
  }
  return written;
}

}  // namespace tessel::train
