// The files of a Hugging Face model directory besides config.json and the
// weights that a trained model needs to be used as the one it came from:
// its tokenizer (tokenizer.json, tokenizer_config.json,
// special_tokens_map.json, added_tokens.json, vocab.json, merges.txt,
// tokenizer.model), its chat template (chat_template.jinja,
// chat_template.json) and generation_config.json. Without them
// AutoTokenizer.from_pretrained fails on an export and a serving engine has
// no tokenizer or stop tokens.
//
// A checkpoint keeps copies of the ones the run's model and tokenizer
// directories hold (policy.model_name, policy.tokenizer.name), listed in its
// manifest and checked like every other file, and records which directories
// they came from (metadata.json "model_files"); `tessel convert` and the
// end-of-training export hand them on into the Hugging Face directory, so a
// checkpoint moved to another machine still exports completely.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "io/file_digest.h"

namespace tessel::train {

// Every name above, in a fixed order.
const std::vector<std::string>& carried_model_file_names();

// Where a run's carried files come from: directories, absolute; "" when the
// run's model (or tokenizer) is a built-in preset, which has none.
struct ModelFileSources {
  std::string model_dir;      // policy.model_name
  std::string tokenizer_dir;  // policy.tokenizer.name, by default policy.model_name
};

ModelFileSources model_file_sources(const config::Config& run_config);

// The carried files that exist, by name: generation_config.json from the
// model directory, the others from the tokenizer directory.
std::map<std::string, std::filesystem::path> find_model_files(const ModelFileSources& sources);

// Copies each file into `dir` under its name (atomically, as every file of
// a checkpoint or an export is written); returns the size and hash of each
// copy, by name, for a checkpoint's manifest.
std::map<std::string, io::FileDigest> copy_model_files(
    const std::map<std::string, std::filesystem::path>& files, const std::filesystem::path& dir);

}  // namespace tessel::train
