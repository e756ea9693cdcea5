// `tessel convert CKPT HF_DIR`: exports a training checkpoint (a step_<N>
// directory, or a checkpoint_dir whose latest step is taken) as a Hugging
// Face model directory (config.json + model.safetensors) that transformers
// and `policy.model_name` load. Runs in one process: the shards of every rank
// are reassembled from the files, whatever mesh wrote them.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "train/checkpoint.h"

namespace tessel::cli {

namespace {

struct ConvertArgs {
  std::string checkpoint;
  std::string out_dir;
};

}  // namespace

void add_convert_command(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* cmd = app.add_subcommand(
      "convert",
      "Export a training checkpoint as a Hugging Face model directory: tessel convert "
      "results/sft/step_60 my_model (or the checkpoint_dir, for its latest step).");
  cmd->add_option("checkpoint", args->checkpoint, "step_<N> directory or checkpoint_dir")
      ->required();
  cmd->add_option("hf_dir", args->out_dir, "output directory (created)")->required();
  cmd->callback([args] {
    const auto step_dir = train::convert_checkpoint_to_hf(args->checkpoint, args->out_dir);
    std::printf("wrote %s from %s\n", args->out_dir.c_str(), step_dir.string().c_str());
  });
}

}  // namespace tessel::cli
