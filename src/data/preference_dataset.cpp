#include "data/preference_dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "data/jsonl_lines.h"
#include "data/sft_template.h"

namespace tessel::data {

PreferenceDataset::PreferenceDataset(std::string name, std::vector<PreferencePair> pairs)
    : name_(std::move(name)), pairs_(std::move(pairs)) {}

const PreferencePair& PreferenceDataset::operator[](int64_t index) const {
  TESSEL_CHECK(index >= 0 && index < size(), "preference dataset '{}': index {} outside [0, {})", name_, index,
               size());
  return pairs_[static_cast<std::size_t>(index)];
}

PreferenceDataset load_preference_dataset(const std::string& dataset_name, const Tokenizer& tokenizer,
                                          const DatasetOptions& options) {
  const bool demo = dataset_name == "demo_dpo";
  const std::string path =
      demo ? find_demo_file(options.split == "train" ? "demo_dpo.jsonl" : "demo_dpo_val.jsonl") : dataset_name;
  if (!demo && !std::filesystem::exists(path)) {
    throw UsageError(fmt::format("preference dataset '{}' is not a file and not a built-in name; "
                                 "data.*.dataset_name must be a path to a .jsonl file of "
                                 "{{\"prompt\", \"chosen\", \"rejected\"}} lines, or \"demo_dpo\"",
                                 dataset_name));
  }
  const int64_t limit = options.sequence.max_input_seq_length;
  std::vector<PreferencePair> pairs;
  const char* names_it = "data.*.dataset_name must be a readable .jsonl file or \"demo_dpo\"";
  for_each_jsonl_object(path, names_it, [&](const nlohmann::json& object, const JsonlLine& line) {
    const char* needed = "a preference example needs 'prompt', 'chosen' and 'rejected'";
    const std::string prompt = line.string_field(object, "prompt", needed);
    PreferencePair pair{build_prompt_response(tokenizer, prompt, line.string_field(object, "chosen", needed),
                                              options.sequence),
                        build_prompt_response(tokenizer, prompt, line.string_field(object, "rejected", needed),
                                              options.sequence)};
    for (const auto* row : {&pair.chosen, &pair.rejected}) {
      const char* which = row == &pair.chosen ? "chosen" : "rejected";
      if (limit > 0 && row->size() > limit) {
        line.fail(fmt::format("the {} row is {} tokens (prompt and response), longer than data.max_input_seq_length={}: "
                              "DPO compares whole responses, so tessel does not cut it; shorten the example, or raise "
                              "data.max_input_seq_length (and policy.max_total_sequence_length) to at least {}",
                              which, row->size(), limit, std::max(pair.chosen.size(), pair.rejected.size())));
      }
      if (row->num_targets() == 0) {
        line.fail(fmt::format("the {} response has no token to learn (empty, and data.add_eos is false)", which));
      }
    }
    pairs.push_back(std::move(pair));
  });
  if (pairs.empty()) throw UsageError(fmt::format("{}: the preference dataset is empty (no non-blank lines)", path));
  return PreferenceDataset(path, std::move(pairs));
}

}  // namespace tessel::data
