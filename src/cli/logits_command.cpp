// `tessel logits MODEL --tokens 3,10,17,... [--json] [--seed N]`: one forward
// pass of a model on one token sequence, printing the logits of every position
// and the mean next-token cross-entropy (target of position t is token t+1, so
// T tokens give T-1 targets). MODEL is a Hugging Face directory or a preset
// name (built from --seed). It is the quickest way to check a checkpoint
// against another implementation. Token ids outside [0, vocab_size) are a
// usage error (exit 2).
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/token_list.h"
#include "core/error.h"
#include "loss/cross_entropy.h"
#include "models/presets.h"
#include "models/pretrained.h"

namespace tessel::cli {

namespace {

struct LogitsArgs {
  std::string model;
  std::string tokens;
  uint64_t seed = 0;
  bool json = false;
};

std::shared_ptr<models::CausalLM> load_model(const LogitsArgs& args) {
  const std::filesystem::path path(args.model);
  if (std::filesystem::is_directory(path)) return models::load_pretrained(path);
  for (const auto& name : models::preset_names()) {
    if (name == args.model) return models::create_preset_model(name, args.seed);
  }
  std::string names;
  for (const auto& n : models::preset_names()) names += (names.empty() ? "" : ", ") + n;
  throw UsageError(fmt::format(
      "'{}' is neither a model directory (config.json + model.safetensors) nor a preset "
      "(known presets: {})",
      args.model, names));
}

void run_logits(const LogitsArgs& args) {
  const std::vector<int64_t> ids = parse_token_list(args.tokens);
  auto model = load_model(args);
  const int64_t vocab = model->config().vocab_size;
  check_token_ids(ids, vocab, "--tokens");
  const int64_t T = static_cast<int64_t>(ids.size());
  at::NoGradGuard no_grad;
  const at::Tensor input = at::tensor(ids, at::kLong).view({1, T});
  // Logits in fp32 whatever the model dtype, so the printout is comparable.
  const at::Tensor logits = model->forward_logits(input).to(at::kFloat).contiguous();

  std::optional<double> loss;
  if (T >= 2) {
    const auto sum = loss::cross_entropy_sum(logits[0], loss::next_token_labels(input)[0]);
    loss = sum.sum.item<double>() / static_cast<double>(sum.num_valid.item<int64_t>());
  }

  const float* data = logits.data_ptr<float>();
  if (args.json) {
    nlohmann::ordered_json out;
    std::vector<std::vector<double>> rows(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) rows[t].assign(data + t * vocab, data + (t + 1) * vocab);
    out["logits"] = rows;
    out["loss"] = loss ? nlohmann::ordered_json(*loss) : nlohmann::ordered_json(nullptr);
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("model: %s (%s), vocab %lld, %lld tokens\n", args.model.c_str(),
                model->config().architecture.c_str(), static_cast<long long>(vocab),
                static_cast<long long>(T));
    for (int64_t t = 0; t < T; ++t) {
      const float* row = data + t * vocab;
      int64_t best = 0;
      for (int64_t v = 1; v < vocab; ++v) best = row[v] > row[best] ? v : best;
      std::printf("position %lld token %lld argmax %lld logits:", static_cast<long long>(t),
                  static_cast<long long>(ids[t]), static_cast<long long>(best));
      for (int64_t v = 0; v < vocab; ++v) std::printf(" %.6g", row[v]);
      std::printf("\n");
    }
    if (loss) {
      std::printf("loss: %.8f (mean next-token cross-entropy over %lld targets)\n", *loss,
                  static_cast<long long>(T - 1));
    } else {
      std::printf("loss: n/a (needs at least 2 tokens)\n");
    }
  }
  std::fflush(stdout);
}

}  // namespace

void add_logits_command(CLI::App& app) {
  auto args = std::make_shared<LogitsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "logits",
      "Run one forward pass on a token sequence and print every position's logits and the mean "
      "next-token cross-entropy: tessel logits my_model --tokens 3,10,17 --json.");
  cmd->add_option("model", args->model, "Hugging Face model directory, or a preset name")
      ->required();
  cmd->add_option("--tokens", args->tokens, "comma-separated token ids, e.g. 3,10,17")->required();
  cmd->add_option("--seed", args->seed, "initialisation seed when MODEL is a preset (default 0)");
  cmd->add_flag("--json", args->json, "print {\"logits\": [[...], ...], \"loss\": x}");
  cmd->callback([args] { run_logits(*args); });
}

}  // namespace tessel::cli
