// The `tessel` program's subcommands. Each lives in its own src/cli/<name>.cpp
// and registers itself on the CLI11 app; main.cpp only wires them together.
// A command's callback throws tessel::UsageError for bad input (exit code 2)
// and tessel::Error for failures (exit code 1).
#pragma once

#include <CLI/CLI.hpp>

namespace tessel::cli {

// `tessel mesh`: validate a layout and print the device mesh (cli/mesh_command.cpp).
void add_mesh_command(CLI::App& app);
// `tessel run -n N -- ARGS`: start N local ranks through mpirun (cli/run_command.cpp).
void add_run_command(CLI::App& app);

}  // namespace tessel::cli
