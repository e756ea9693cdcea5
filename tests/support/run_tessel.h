// Runs the built `tessel` program (or any command line) for end-to-end
// tests, through the shell (popen), and returns its exit code and output. The program is
// $TESSEL_BINARY_DIR/bin/tessel; ctest sets the variable (tests/CMakeLists.txt).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace tessel::test_support {

struct Result {
  int exit_code = -1;  // 128 + N when killed by signal N
  std::string output;  // stdout, then stderr when merged
};

// A program built into the same folder as the running test binary (a test's
// helper program, e.g. a fault peer it launches under mpirun).
inline std::string program_beside_this_test(const std::string& name) {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / name).string();
}

inline std::string tessel_binary() {
  const char* dir = std::getenv("TESSEL_BINARY_DIR");
  return std::string(dir ? dir : ".") + "/bin/tessel";
}

// A shell command line (popen): its exit code and what it printed on stdout
// (redirect stderr in the line to have it too).
inline Result run_command(const std::string& command_line) {
  Result r;
  FILE* pipe = ::popen(command_line.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 65536> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// `tessel ARGS` with stdin from /dev/null. stderr goes to the output when
// `merge_stderr` (for messages), or is dropped (for parsing stdout as JSON).
// `env_prefix` is put before the command: shell variable assignments such as
// "TESSEL_X=1", or "PATH=/nonexistent".
inline Result run_tessel(const std::string& args, bool merge_stderr = true,
                         const std::string& env_prefix = "") {
  return run_command(env_prefix + " '" + tessel_binary() + "' " + args +
                     (merge_stderr ? " 2>&1" : " 2>/dev/null") + " </dev/null");
}

}  // namespace tessel::test_support
