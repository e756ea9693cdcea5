#include "dist/launcher.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "core/error.h"

extern char** environ;

namespace tessel::dist {
namespace {

// Appends through string_view: GCC 12 at -O2 reports false -Warray-bounds on
// std::string temporaries built from short literals in insert()/push_back().
void append(std::vector<std::string>& argv, std::initializer_list<std::string_view> items) {
  for (std::string_view item : items) argv.emplace_back(item);
}

}  // namespace

std::vector<std::string> mpirun_command(const LaunchOptions& o) {
  if (o.num_ranks < 1) {
    throw UsageError(fmt::format("-n {}: the number of ranks must be at least 1", o.num_ranks));
  }
  if (o.program.empty()) throw UsageError("no program to launch: the tessel binary path is empty");
  std::vector<std::string> argv = {o.mpirun};
  if (o.as_root) append(argv, {"--allow-run-as-root"});
  const std::string np = std::to_string(o.num_ranks);
  append(argv, {"-np", np});
  if (!o.hostfile.empty()) {
    append(argv, {"--hostfile", o.hostfile});
  } else if (o.num_ranks > o.local_cores) {
    // With a host file, its slot counts are the user's statement of capacity;
    // locally, more ranks than cores is still correct, only slower.
    append(argv, {"--oversubscribe"});
  }
  append(argv, {"--bind-to", "none", "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMP_NUM_THREADS=1"});
  for (const auto& name : o.forward_env) append(argv, {"-x", name});
  argv.push_back(o.program);
  argv.insert(argv.end(), o.program_args.begin(), o.program_args.end());
  return argv;
}

std::vector<std::string> tessel_env_names() {
  std::vector<std::string> names;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    const auto eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view name = entry.substr(0, eq);
    if (name.substr(0, 7) == "TESSEL_") names.emplace_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string find_executable(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) {
    return ::access(name.c_str(), X_OK) == 0 ? name : "";
  }
  const char* path_env = std::getenv("PATH");
  const std::string path = path_env ? path_env : "";
  size_t begin = 0;
  while (begin <= path.size()) {
    size_t end = path.find(':', begin);
    if (end == std::string::npos) end = path.size();
    // An empty PATH entry means the current directory.
    const std::string candidate =
        end == begin ? fmt::format("./{}", name)
                     : fmt::format("{}/{}", std::string_view(path).substr(begin, end - begin), name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    begin = end + 1;
  }
  return "";
}

}  // namespace tessel::dist
