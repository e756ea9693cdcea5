#include "data/dataset.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "data/synthetic.h"

namespace tessel::data {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSyntheticName = "synthetic";

bool is_demo_name(const std::string& name) { return name == "demo_sft" || name == "demo"; }

}  // namespace

Dataset::Dataset(std::string name, std::vector<Example> examples)
    : name_(std::move(name)), examples_(std::move(examples)) {}

const Example& Dataset::operator[](int64_t index) const {
  TESSEL_CHECK(index >= 0 && index < size(), "dataset '{}': index {} outside [0, {})", name_, index,
               size());
  return examples_[static_cast<std::size_t>(index)];
}

std::string find_demo_dataset(const std::string& split) {
  return find_demo_file(split == "train" ? "demo_sft.jsonl" : "demo_sft_val.jsonl");
}

std::string find_demo_file(const std::string& file_name) {
  const fs::path relative = fs::path("examples") / "data" / file_name;
  std::vector<fs::path> roots;
  if (const char* source_dir = std::getenv("TESSEL_SOURCE_DIR")) roots.emplace_back(source_dir);
  roots.push_back(fs::current_path());
  // The program usually runs from <repo>/build/<name>/bin: search upwards.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path();
         dir = dir.parent_path()) {
      roots.push_back(dir);
    }
  }
  std::string searched;
  for (const fs::path& root : roots) {
    const fs::path candidate = root / relative;
    if (fs::is_regular_file(candidate)) return fs::absolute(candidate).string();
    searched += (searched.empty() ? "" : ", ") + candidate.string();
  }
  throw UsageError(fmt::format(
      "the demo dataset {} was not found (searched: {}); run from the tessel source tree, set "
      "TESSEL_SOURCE_DIR to it, or give data.*.dataset_name as a path",
      relative.string(), searched));
}

bool dataset_needs_tokenizer(const std::string& dataset_name) {
  return dataset_name != kSyntheticName;
}

Dataset load_dataset(const std::string& dataset_name, const Tokenizer* tokenizer,
                     const DatasetOptions& options) {
  if (dataset_name == kSyntheticName) {
    const int64_t length = options.synthetic_sequence_length > 0
                               ? options.synthetic_sequence_length
                               : options.sequence.max_input_seq_length;
    return make_synthetic_dataset(options.seed, options.split, options.synthetic_num_examples,
                                  length, options.vocab_size);
  }
  if (is_demo_name(dataset_name)) {
    return load_jsonl_dataset(find_demo_dataset(options.split), tokenizer, options);
  }
  if (!fs::exists(dataset_name)) {
    throw UsageError(fmt::format(
        "dataset '{}' is not a file and not a built-in name; data.*.dataset_name must be a path "
        "to a .jsonl file, \"synthetic\" or \"demo_sft\"",
        dataset_name));
  }
  return load_jsonl_dataset(dataset_name, tokenizer, options);
}

}  // namespace tessel::data
