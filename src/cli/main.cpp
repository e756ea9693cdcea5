// Entry point of the `tessel` program: subcommands, error reporting, exit codes
// (0 ok, 1 failure, 2 bad usage / invalid configuration or layout).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/error.h"
#include "dist/communicator.h"

int main(int argc, char** argv) {
  CLI::App app{"tessel: distributed training of Hugging Face-style language models in C++"};
  app.require_subcommand(1);
  tessel::cli::add_mesh_command(app);
  tessel::cli::add_plan_command(app);
  tessel::cli::add_run_command(app);
  tessel::cli::add_train_command(app);
  tessel::cli::add_convert_command(app);
  tessel::cli::add_init_model_command(app);
  tessel::cli::add_logits_command(app);
  int code = 0;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    code = app.exit(e);
  } catch (const tessel::UsageError& e) {
    std::fprintf(stderr, "tessel: error: %s\n", e.what());
    code = 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessel: error: %s\n", e.what());
    code = 1;
  }
  tessel::dist::shutdown();
  return code;
}
