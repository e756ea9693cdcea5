// A command that runs one training recipe (train/recipe.h) over the shared
// loop, from a config file and overrides: `tessel train` (SFT) and `tessel
// dpo`. They parse, check, launch and report alike (cli/recipe_command.cpp);
// what differs is this description.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "config/config.h"
#include "dist/device_mesh.h"
#include "train/trainer.h"

namespace tessel::cli {

struct RecipeCommand {
  std::string name;            // the subcommand: "train", "dpo"
  std::string default_config;  // run without CONFIG: this file of examples/configs
  std::string example_config;  // named in the message when the default is missing
  // Reads every key of the config (UsageError for a bad one) before any
  // process is launched.
  std::function<void(const config::Config&)> check;
  // The run itself, on every rank of `mesh`.
  std::function<void(const config::Config&, const dist::DeviceMesh&, const train::RunOptions&)> run;
};

void add_recipe_command(CLI::App& app, RecipeCommand command, const std::string& description);

}  // namespace tessel::cli
