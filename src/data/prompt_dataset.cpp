#include "data/prompt_dataset.h"

#include <fmt/format.h>

#include <filesystem>

#include "core/error.h"
#include "data/jsonl_lines.h"
#include "data/sft_template.h"

namespace tessel::data {

PromptDataset::PromptDataset(std::string name, std::vector<PromptExample> prompts)
    : name_(std::move(name)), prompts_(std::move(prompts)) {}

const PromptExample& PromptDataset::operator[](int64_t index) const {
  TESSEL_CHECK(index >= 0 && index < size(), "prompt dataset '{}': index {} outside [0, {})", name_, index, size());
  return prompts_[static_cast<std::size_t>(index)];
}

PromptDataset load_prompt_dataset(const std::string& dataset_name, const Tokenizer& tokenizer,
                                  const DatasetOptions& options) {
  const bool demo = dataset_name == "demo_sft" || dataset_name == "demo";
  const std::string path = demo ? find_demo_dataset(options.split) : dataset_name;
  if (!demo && !std::filesystem::exists(path)) {
    throw UsageError(fmt::format("prompt dataset '{}' is not a file and not a built-in name; data.*.dataset_name "
                                 "must be a path to a .jsonl file of {{\"input\": prompt, \"output\": reference "
                                 "answer}} lines, or \"demo_sft\"",
                                 dataset_name));
  }
  // The prompt part of an SFT example: [bos] input, no response, no eos.
  SequenceOptions prompt_only = options.sequence;
  prompt_only.add_eos = false;
  const int64_t limit = options.sequence.max_input_seq_length;
  std::vector<PromptExample> prompts;
  const char* names_it = "data.*.dataset_name must be a readable .jsonl file or \"demo_sft\"";
  for_each_jsonl_object(path, names_it, [&](const nlohmann::json& object, const JsonlLine& line) {
    const char* needed = "a GRPO prompt needs 'input' (the prompt) and 'output' (its reference answer)";
    const std::string input = line.string_field(object, "input", needed);
    PromptExample p{build_prompt_response(tokenizer, input, "", prompt_only).tokens,
                    line.string_field(object, "output", needed)};
    if (p.tokens.empty()) line.fail("the prompt is empty (and data.add_bos is false): nothing to generate from");
    if (limit > 0 && static_cast<int64_t>(p.tokens.size()) >= limit) {
      line.fail(fmt::format("the prompt is {} tokens, leaving no room for a response within "
                            "data.max_input_seq_length={}; shorten it or raise data.max_input_seq_length (and "
                            "policy.max_total_sequence_length)",
                            p.tokens.size(), limit));
    }
    prompts.push_back(std::move(p));
  });
  if (prompts.empty()) throw UsageError(fmt::format("{}: the prompt dataset is empty (no non-blank lines)", path));
  return PromptDataset(path, std::move(prompts));
}

}  // namespace tessel::data
