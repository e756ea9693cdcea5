// `tessel tokenize MODEL_DIR --text "..." [--json]`: the ids tessel's own
// tokenizer (data/bpe_tokenizer.h) gives a text with MODEL_DIR's
// tokenizer.json, and each id's piece (the text that id alone decodes to), so
// a user can compare them with Hugging Face's before training on a model.
// No special tokens are added (as HF's encode(text, add_special_tokens=False));
// added and special tokens written in the text are matched. A tokenizer.json
// that tessel cannot run exactly is refused with the reason (training would
// fall back to bytes), rather than printing ids that are not the model's.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "data/bpe_tokenizer.h"

namespace tessel::cli {

namespace {

struct TokenizeArgs {
  std::string model_dir;
  std::string text;
  bool json = false;
};

void run_tokenize(const TokenizeArgs& args) {
  const std::filesystem::path dir(args.model_dir);
  if (!std::filesystem::is_regular_file(dir / "tokenizer.json")) {
    throw UsageError(fmt::format("tokenize: {} has no tokenizer.json; give a Hugging Face model directory "
                                 "that has one",
                                 args.model_dir));
  }
  std::string why_unsupported;
  const std::shared_ptr<data::BpeTokenizer> tokenizer = data::read_bpe_tokenizer(dir, why_unsupported);
  if (!tokenizer) {
    throw UsageError(fmt::format("tokenize: {}: {}; tessel's tokenizer does not implement that (training on this "
                                 "model would use bytes as tokens)",
                                 (dir / "tokenizer.json").string(), why_unsupported));
  }
  const std::vector<int64_t> ids = tokenizer->encode(args.text);
  std::vector<std::string> pieces;
  for (int64_t id : ids) pieces.push_back(tokenizer->decode({id}));
  if (args.json) {
    nlohmann::ordered_json out;
    out["ids"] = ids;
    out["pieces"] = pieces;
    // A piece may be part of a character's bytes: shown as U+FFFD.
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return;
  }
  std::printf("%s, %zu tokens\n", tokenizer->describe().c_str(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    std::printf("%8lld  %s\n", static_cast<long long>(ids[i]), nlohmann::json(pieces[i]).dump(-1, ' ', false,
                                                                               nlohmann::json::error_handler_t::replace)
                                                               .c_str());
  }
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "tokenize", "The ids and pieces of a text under a model directory's tokenizer.json, as tessel trains on them: "
                  "tessel tokenize my_model --text \"Hello\"");
  cmd->add_option("model_dir", args->model_dir, "Hugging Face model directory with tokenizer.json")->required();
  cmd->add_option("--text", args->text, "the text to tokenize")->required();
  cmd->add_flag("--json", args->json, "print {\"ids\": [...], \"pieces\": [...]}");
  cmd->callback([args] { run_tokenize(*args); });
}

}  // namespace tessel::cli
