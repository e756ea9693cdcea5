#include <fmt/format.h>

#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "data/tokenizer.h"

namespace tessel::data {
namespace {

std::shared_ptr<Tokenizer> check_fits(std::shared_ptr<Tokenizer> tokenizer,
                                      int64_t model_vocab_size) {
  if (tokenizer->vocab_size() > model_vocab_size) {
    throw UsageError(
        fmt::format("the tokenizer produces ids up to {} but the model has only {} embedding rows "
                    "(vocab_size in config.json): use the tokenizer that belongs to this model "
                    "(policy.tokenizer.name)",
                    tokenizer->vocab_size() - 1, model_vocab_size));
  }
  // What was loaded is logged once by the caller (the trainer's model line).
  return tokenizer;
}

}  // namespace

std::shared_ptr<Tokenizer> load_tokenizer(const std::string& model_dir_or_preset,
                                          int64_t model_vocab_size) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir_or_preset);
  if (!fs::is_directory(dir)) {
    if (model_dir_or_preset.find('/') != std::string::npos || fs::exists(dir)) {
      throw UsageError(fmt::format(
          "tokenizer '{}' is not a directory: give a model directory holding tokenizer.json "
          "or a built-in preset name (which uses the byte-level tokenizer)",
          model_dir_or_preset));
    }
    log::info("tokenizer: '{}' is a preset name, using bytes", model_dir_or_preset);
    return check_fits(std::make_shared<ByteTokenizer>(model_vocab_size), model_vocab_size);
  }
  if (!fs::exists(dir / "tokenizer.json")) {
    log::info("tokenizer: {} has no tokenizer.json, falling back to bytes", dir.string());
    return check_fits(std::make_shared<ByteTokenizer>(model_vocab_size), model_vocab_size);
  }
  std::string why_unsupported;
  auto bpe = read_bpe_tokenizer(dir, why_unsupported);
  if (!bpe) {
    log::info("tokenizer: {} uses what tessel does not support ({}), falling back to bytes",
              (dir / "tokenizer.json").string(), why_unsupported);
    return check_fits(std::make_shared<ByteTokenizer>(model_vocab_size), model_vocab_size);
  }
  return check_fits(bpe, model_vocab_size);
}

}  // namespace tessel::data
