// Entry point of the `tessel` program: subcommands, error reporting, exit codes
// (0 ok, 1 failure, 2 bad usage / invalid configuration or layout).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "core/counting_allocator.h"
#include "core/error.h"
#include "dist/communicator.h"

// jemalloc's settings for the tessel program (it links jemalloc, see
// CMakeLists.txt), read once at start-up; MALLOC_CONF in the environment
// still overrides them. Freed pages stay with the process for reuse instead
// of going back to the OS: a training step frees and re-allocates the same
// sizes every step, and with jemalloc's default decay each step faulted in
// about 200 MB again (50,000 page faults a step on one bench-medium process,
// about 1,000 with these settings). Measured (docs/bench/vs_pytorch.md):
// FSDP over 2 ranks 1.28-1.42 s/step against 1.52-1.72 s with the default,
// three interleaved pairs; the peak RSS (VmHWM) rose 4% (855 -> 893 MB).
extern "C" {
// NOLINTNEXTLINE: the name and type are jemalloc's interface.
__attribute__((used)) const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1";
}

namespace {

// Prints the error (naming the rank in a multi-rank job) and ends: the whole
// job at once when other ranks may be waiting for this one.
int fail(const char* message, int exit_code) {
  std::fprintf(stderr, "tessel: error%s: %s\n", tessel::dist::rank_label().c_str(), message);
  return tessel::dist::end_job_after_error(exit_code);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tessel: distributed training of Hugging Face-style language models in C++"};
  app.require_subcommand(1);
  tessel::cli::add_mesh_command(app);
  tessel::cli::add_plan_command(app);
  tessel::cli::add_run_command(app);
  tessel::cli::add_train_command(app);
  tessel::cli::add_dpo_command(app);
  tessel::cli::add_grpo_command(app);
  tessel::cli::add_convert_command(app);
  tessel::cli::add_init_model_command(app);
  tessel::cli::add_logits_command(app);
  tessel::cli::add_tokenize_command(app);
  tessel::cli::add_logprobs_command(app);
  tessel::cli::add_generate_command(app);
  int code = 0;
  try {
    // Before any tensor exists, so that every tensor is counted.
    tessel::CountingCpuAllocator::install_from_env();
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    code = app.exit(e);
  } catch (const tessel::UsageError& e) {
    return fail(e.what(), 2);
  } catch (const std::exception& e) {
    return fail(e.what(), 1);
  }
  tessel::dist::shutdown();
  return code;
}
