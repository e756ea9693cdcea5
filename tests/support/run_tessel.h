// Runs the built `tessel` program for end-to-end tests, through the shell
// (popen), and returns its exit code and output. The program is
// $TESSEL_BINARY_DIR/bin/tessel; ctest sets the variable (tests/CMakeLists.txt).
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace tessel::test_support {

struct Result {
  int exit_code = -1;  // 128 + N when killed by signal N
  std::string output;  // stdout, then stderr when merged
};

inline std::string tessel_binary() {
  const char* dir = std::getenv("TESSEL_BINARY_DIR");
  return std::string(dir ? dir : ".") + "/bin/tessel";
}

// `tessel ARGS` with stdin from /dev/null. stderr goes to the output when
// `merge_stderr` (for messages), or is dropped (for parsing stdout as JSON).
// `env_prefix` is put before the command: shell variable assignments such as
// "TESSEL_X=1", or "PATH=/nonexistent".
inline Result run_tessel(const std::string& args, bool merge_stderr = true,
                         const std::string& env_prefix = "") {
  const std::string cmd = env_prefix + " '" + tessel_binary() + "' " + args +
                          (merge_stderr ? " 2>&1" : " 2>/dev/null") + " </dev/null";
  Result r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  std::array<char, 65536> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

}  // namespace tessel::test_support
