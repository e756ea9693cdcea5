#include "dist/process_tree.h"

#include <dirent.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

namespace tessel::dist {
namespace {

// The parent of `pid` from /proc/<pid>/stat, -1 if it is gone. The command
// name (field 2) may hold spaces and parentheses: the fields after it start
// after its last ')'.
pid_t parent_of(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  std::FILE* file = std::fopen(path.c_str(), "r");
  if (file == nullptr) return -1;
  char buffer[1024];
  const size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, file);
  std::fclose(file);
  buffer[n] = '\0';
  const char* close = std::strrchr(buffer, ')');
  if (close == nullptr) return -1;
  char state = 0;
  int parent = -1;
  if (std::sscanf(close + 1, " %c %d", &state, &parent) != 2) return -1;
  return static_cast<pid_t>(parent);
}

}  // namespace

std::vector<pid_t> descendants_of(pid_t root) {
  std::multimap<pid_t, pid_t> children;  // parent -> child
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return {};
  while (const dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || pid <= 0) continue;
    const pid_t parent = parent_of(static_cast<pid_t>(pid));
    if (parent > 0) children.emplace(parent, static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  std::vector<pid_t> found;
  std::vector<pid_t> frontier = {root};
  while (!frontier.empty()) {
    const pid_t parent = frontier.back();
    frontier.pop_back();
    const auto [begin, end] = children.equal_range(parent);
    for (auto it = begin; it != end; ++it) {
      found.push_back(it->second);
      frontier.push_back(it->second);
    }
  }
  return found;
}

}  // namespace tessel::dist
