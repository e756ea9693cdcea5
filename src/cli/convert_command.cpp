// `tessel convert CKPT HF_DIR [--dtype bfloat16|float16|float32]
// [--max-shard-size 5GB]`: exports a training checkpoint (a step_<N>
// directory, or a checkpoint_dir whose latest step is taken) as a new
// Hugging Face model directory that transformers, vLLM and
// `policy.model_name` load: config.json, the weights (sharded with
// model.safetensors.index.json past the shard size) and the tokenizer and
// generation files of the model the run started from. One process streams
// the checkpoint tensor by tensor (train/hf_export.h), so its memory does
// not grow with the model, whatever mesh wrote the checkpoint.
#include <cstdio>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "io/byte_size.h"
#include "train/hf_export.h"

namespace tessel::cli {

namespace {

struct ConvertArgs {
  std::string checkpoint;
  std::string out_dir;
  std::string dtype = "float32";
  std::string max_shard_size = "5GB";
};

void run_convert(const ConvertArgs& args) {
  train::HfExportOptions options;
  options.dtype = train::export_dtype_from_name(args.dtype, "convert: --dtype");
  options.max_shard_bytes = io::parse_byte_size(args.max_shard_size, "convert: --max-shard-size");
  const train::ExportSummary s = train::export_checkpoint(args.checkpoint, args.out_dir, options);
  std::string carried;
  for (const auto& name : s.model_files) carried += (carried.empty() ? "" : ", ") + name;
  std::printf("wrote %s from %s: %s, %.1f MB in %zu safetensors file%s; %s\n", args.out_dir.c_str(),
              s.step_dir.string().c_str(), args.dtype.c_str(), static_cast<double>(s.weight_bytes) / 1e6,
              s.weight_files, s.weight_files == 1 ? "" : "s",
              carried.empty() ? "no tokenizer or generation files (the run's model had none: a preset?)"
                              : ("with " + carried).c_str());
}

}  // namespace

void add_convert_command(CLI::App& app) {
  auto args = std::make_shared<ConvertArgs>();
  CLI::App* cmd = app.add_subcommand(
      "convert",
      "Export a training checkpoint as a Hugging Face model directory: tessel convert "
      "results/sft/step_60 my_model --dtype bfloat16 (or the checkpoint_dir, for its latest step).");
  cmd->add_option("checkpoint", args->checkpoint, "step_<N> directory or checkpoint_dir")->required();
  cmd->add_option("hf_dir", args->out_dir, "output directory (new, or empty)")->required();
  cmd->add_option("--dtype", args->dtype,
                  "dtype of the exported weights: float32 (the checkpoint's values exactly; default), bfloat16 or "
                  "float16");
  cmd->add_option("--max-shard-size", args->max_shard_size,
                  "largest safetensors file before the weights are sharded with an index (default 5GB, as "
                  "transformers; units KB, MB, GB, KiB, MiB, GiB)");
  cmd->callback([args] { run_convert(*args); });
}

}  // namespace tessel::cli
