// The `tessel` program's subcommands. Each lives in its own src/cli/<name>.cpp
// and registers itself on the CLI11 app; main.cpp only wires them together.
// A command's callback throws tessel::UsageError for bad input (exit code 2)
// and tessel::Error for failures (exit code 1).
#pragma once

#include <CLI/CLI.hpp>

namespace tessel::cli {

// `tessel mesh`: validate a layout and print the device mesh (cli/mesh_command.cpp).
void add_mesh_command(CLI::App& app);
// `tessel plan [CONFIG] [overrides]`: the resolved tensor-parallel plan per module (cli/plan_command.cpp).
void add_plan_command(CLI::App& app);
// `tessel run -n N -- ARGS`: start N local ranks through mpirun (cli/run_command.cpp).
void add_run_command(CLI::App& app);
// `tessel train [CONFIG] [overrides] [--nproc N]`: train a model (cli/train_command.cpp).
void add_train_command(CLI::App& app);
// `tessel dpo [CONFIG] [overrides] [--nproc N]`: DPO on preference pairs (cli/dpo_command.cpp).
void add_dpo_command(CLI::App& app);
// `tessel grpo [CONFIG] [overrides] [--nproc N]`: GRPO with tessel's own rollouts (cli/grpo_command.cpp).
void add_grpo_command(CLI::App& app);
// `tessel convert CKPT HF_DIR [--dtype D] [--max-shard-size S]`: checkpoint ->
// Hugging Face directory (cli/convert_command.cpp).
void add_convert_command(CLI::App& app);
// `tessel init-model PRESET OUT_DIR [--seed N]`: a preset as an HF directory
// (cli/init_model_command.cpp).
void add_init_model_command(CLI::App& app);
// `tessel logits MODEL --tokens 3,10,17 [--json]`: one forward, logits and loss
// (cli/logits_command.cpp).
void add_logits_command(CLI::App& app);
// `tessel tokenize MODEL_DIR --text T [--json]`: ids and pieces under the
// model's tokenizer.json (cli/tokenize_command.cpp).
void add_tokenize_command(CLI::App& app);
// `tessel logprobs MODEL --tokens 3,10,17 [--temperature T] [--json]`: each
// token's log-probability, on any layout (cli/logprobs_command.cpp).
void add_logprobs_command(CLI::App& app);
// `tessel generate MODEL --tokens 3,10,17 --max-new-tokens N [--greedy | --temperature T ...] [--json]`:
// tokens generated with a KV cache, on any layout (cli/generate_command.cpp).
void add_generate_command(CLI::App& app);

}  // namespace tessel::cli
