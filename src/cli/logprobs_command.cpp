// `tessel logprobs MODEL [OVERRIDES...] (--tokens 3,10,17 | --input FILE.jsonl)
//  [--temperature T] [--json] [--nproc N]`: the log-probability the model
// assigns to every token of one sequence or a batch of them
// (policy/logprobs.h: position 0 is 0, position i is log p(token i | tokens
// before it) with the logits divided by T), on any layout. MODEL is a Hugging
// Face directory or a preset (initialised from sft.seed, --seed). The layout
// comes from overrides of the base recipe, e.g.
//   tessel logprobs my_model --tokens 3,10,17 --nproc 2 policy.dtensor_cfg.tensor_parallel_size=2
// Like `tessel train`, more than one process is started through mpirun.
//
// --input: one JSON object per line, {"tokens": [ids...]}; the sequences are
// right-padded into one batch, split over the data-parallel ranks, and the
// results printed in input order, one line each ({"logprobs": [...]} with
// --json). Bad input (an id outside the vocabulary, a line without tokens) is
// a usage error naming the line (exit 2).
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/default_config.h"
#include "cli/environment_check.h"
#include "cli/mesh_sizes_from_config.h"
#include "cli/self_launch.h"
#include "cli/token_list.h"
#include "config/parallelism_config.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "dist/device_world.h"
#include "policy/logprobs.h"
#include "train/model_setup.h"
#include "train/train_options.h"

namespace tessel::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct LogprobsArgs {
  std::vector<std::string> positional;  // MODEL then overrides
  std::string tokens;
  std::string input;
  double temperature = 1.0;
  int64_t seed = -1;  // -1: the recipe's sft.seed
  bool json = false;
  int nproc = 0;
  std::string mpirun = "mpirun";
};

// The sequences to score, each checked against the vocabulary.
std::vector<std::vector<int64_t>> read_sequences(const LogprobsArgs& args, int64_t vocab) {
  std::vector<std::vector<int64_t>> out;
  if (!args.tokens.empty()) {
    out.push_back(parse_token_list(args.tokens));
    check_token_ids(out.back(), vocab, "--tokens");
    return out;
  }
  std::ifstream in(args.input);
  if (!in) throw UsageError(fmt::format("--input {}: cannot open the file", args.input));
  std::string text;
  for (int64_t line = 1; std::getline(in, text); ++line) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", args.input, line);
    const json row = json::parse(text, nullptr, /*allow_exceptions=*/false);
    out.push_back(json_token_ids(row, vocab, where, "an object {\"tokens\": [ids...]}"));
  }
  if (out.empty()) throw UsageError(fmt::format("--input {}: no sequences (the file is empty)", args.input));
  return out;
}

void print(const LogprobsArgs& args, const std::vector<std::vector<int64_t>>& sequences, const at::Tensor& logprobs) {
  for (size_t i = 0; i < sequences.size(); ++i) {
    const auto& ids = sequences[i];
    const at::Tensor row = logprobs[static_cast<int64_t>(i)].to(at::kDouble);
    std::vector<double> values(ids.size());
    for (size_t t = 0; t < ids.size(); ++t) values[t] = row[static_cast<int64_t>(t)].item<double>();
    double total = 0.0;
    for (double v : values) total += v;
    if (args.json) {
      nlohmann::ordered_json out;
      out["logprobs"] = values;
      out["sum"] = total;
      out["temperature"] = args.temperature;
      std::printf("%s\n", out.dump().c_str());
      continue;
    }
    if (sequences.size() > 1) std::printf("sequence %zu:\n", i);
    for (size_t t = 0; t < ids.size(); ++t) {
      std::printf("position %zu token %lld logprob %.8f\n", t, static_cast<long long>(ids[t]), values[t]);
    }
    std::printf("sum: %.8f (temperature %g)\n", total, args.temperature);
  }
  std::fflush(stdout);
}

void run_logprobs(const LogprobsArgs& args) {
  if (args.tokens.empty() == args.input.empty()) {
    throw UsageError("logprobs: give exactly one of --tokens 3,10,17 or --input FILE.jsonl");
  }
  const config::Config cfg = model_command_config(args.positional, args.seed);
  const config::ParallelismConfig parallel = config::parallelism_from(cfg);
  const train::TrainOptions options = train::train_options_from(cfg);
  const train::ModelSource source = train::model_source(options);  // config.json only
  const auto sequences = read_sequences(args, source.model->config().vocab_size);
  check_tessel_environment();
  if (!under_mpi_launcher()) {
    const int64_t wanted = args.nproc > 0 ? args.nproc : parallel.world_size();
    const dist::MeshLayout layout(mesh_sizes_from(parallel, wanted));  // checked before launching
    if (wanted > 1) {
      std::vector<std::string> program_args = {"logprobs"};
      program_args.insert(program_args.end(), args.positional.begin(), args.positional.end());
      if (!args.tokens.empty()) program_args.insert(program_args.end(), {"--tokens", args.tokens});
      if (!args.input.empty()) program_args.insert(program_args.end(), {"--input", fs::absolute(args.input).string()});
      program_args.insert(program_args.end(), {"--temperature", fmt::format("{}", args.temperature)});
      if (args.seed >= 0) program_args.insert(program_args.end(), {"--seed", std::to_string(args.seed)});
      if (args.json) program_args.push_back("--json");
      relaunch_self("logprobs", program_args, static_cast<int>(wanted), args.mpirun);
    }
  }
  const dist::DeviceWorld placed = dist::setup_device_world(dist::world());
  const dist::CommunicatorPtr& world = placed.world;
  const dist::DeviceMesh mesh(dist::MeshLayout(mesh_sizes_from(parallel, world->size())), world, placed.device);
  train::ShardedModel model = train::setup_model(options, mesh, parallel);

  // One right-padded batch, cut into equal blocks of rows per dp rank (the
  // last row repeated to fill the last block), gathered back over dp.
  const int64_t rows = static_cast<int64_t>(sequences.size());
  int64_t longest = 0;
  for (const auto& s : sequences) longest = std::max<int64_t>(longest, static_cast<int64_t>(s.size()));
  const int64_t dp = mesh.layout().dp_size(), per_rank = (rows + dp - 1) / dp;
  at::Tensor ids = at::zeros({per_rank * dp, longest}, at::kLong);
  at::Tensor lengths = at::empty({per_rank * dp}, at::kLong);
  for (int64_t r = 0; r < per_rank * dp; ++r) {
    const auto& s = sequences[static_cast<size_t>(std::min(r, rows - 1))];
    ids[r].narrow(0, 0, static_cast<int64_t>(s.size())).copy_(at::tensor(s, at::kLong));
    lengths[r] = static_cast<int64_t>(s.size());
  }
  const int64_t first = mesh.coordinate("dp") * per_rank;
  const at::Tensor mine = policy::get_logprobs(model, mesh, ids.narrow(0, first, per_rank),
                                               lengths.narrow(0, first, per_rank), args.temperature);
  at::Tensor all = at::empty({per_rank * dp * longest}, mine.options().device(mesh.device()));
  mesh.group("dp")->all_gather_into(all, mine.contiguous().view({-1}).to(mesh.device()));
  if (world->rank() == 0) print(args, sequences, all.cpu().view({per_rank * dp, longest}).narrow(0, 0, rows));
}

}  // namespace

void add_logprobs_command(CLI::App& app) {
  auto args = std::make_shared<LogprobsArgs>();
  CLI::App* cmd = app.add_subcommand(
      "logprobs",
      "Print the log-probability of every token given the ones before it (position 0 is 0), on any layout: "
      "tessel logprobs my_model --tokens 3,10,17 [--temperature 0.7] [--json] [--nproc 2 "
      "policy.dtensor_cfg.tensor_parallel_size=2]; --input FILE.jsonl ({\"tokens\": [...]} per line) for a batch.");
  cmd->add_option("model_and_overrides", args->positional,
                  "Hugging Face model directory or preset name, then overrides of the base recipe (a.b=v)")
      ->required();
  cmd->add_option("--tokens", args->tokens, "comma-separated token ids, e.g. 3,10,17");
  cmd->add_option("--input", args->input, "a .jsonl file of {\"tokens\": [ids...]} lines, scored as one batch");
  cmd->add_option("--temperature", args->temperature, "divide the logits by this before the softmax (default 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--seed", args->seed, "initialisation seed when MODEL is a preset (default: sft.seed)");
  cmd->add_flag("--json", args->json, "print {\"logprobs\": [...], \"sum\": x, \"temperature\": T} per sequence");
  cmd->add_option("--nproc", args->nproc,
                  "number of local processes (default: cluster.num_nodes * cluster.gpus_per_node)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--mpirun", args->mpirun, "the mpirun to launch with (default: mpirun on PATH)");
  cmd->callback([args] { run_logprobs(*args); });
}

}  // namespace tessel::cli
