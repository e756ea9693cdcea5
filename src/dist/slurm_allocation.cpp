#include "dist/slurm_allocation.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace tessel::dist {

std::vector<AllocationNode> parse_scontrol_nodes(const std::string& text) {
  std::vector<AllocationNode> nodes;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string field;
    AllocationNode node;
    while (fields >> field) {
      if (field.rfind("NodeName=", 0) == 0) node.name = field.substr(9);
      if (field.rfind("NodeAddr=", 0) == 0) node.address = field.substr(9);
    }
    if (node.name.empty()) continue;
    if (node.address.empty()) node.address = node.name;
    nodes.push_back(std::move(node));
  }
  return nodes;
}

namespace {

// Runs argv (looked up on PATH) and returns its standard output, or sets
// `why` when it cannot start, fails or has not finished within `timeout`
// (then it is killed). Its error output goes into `why` as well.
std::string output_of(const std::vector<std::string>& argv, std::chrono::milliseconds timeout, std::string& why) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    why = fmt::format("pipe: {}", std::strerror(errno));
    return {};
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t child = ::fork();
  if (child < 0) {
    why = fmt::format("fork: {}", std::strerror(errno));
    ::close(out[0]);
    ::close(out[1]);
    return {};
  }
  if (child == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    ::execvp(args[0], args.data());
    const std::string message = fmt::format("could not start {}: {}", argv[0], std::strerror(errno));
    (void)!::write(STDERR_FILENO, message.data(), message.size());
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool finished = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) break;
    pollfd p{out[0], POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) < 0 && errno != EINTR) break;
    if (p.revents == 0) continue;
    char buffer[4096];
    const ssize_t n = ::read(out[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      finished = true;
      break;
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(out[0]);
  if (!finished) ::kill(child, SIGKILL);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!finished) {
    why = fmt::format("{} did not answer within {} ms", argv[0], timeout.count());
    return {};
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
    why = fmt::format("{} failed: {}", argv[0], text.empty() ? "no message" : text);
    return {};
  }
  return text;
}

}  // namespace

std::vector<AllocationNode> slurm_allocation_nodes(std::chrono::milliseconds timeout, std::string& why) {
  const char* list = std::getenv("SLURM_JOB_NODELIST");
  if (list == nullptr || *list == '\0') return {};
  const std::string text = output_of({"scontrol", "show", "node", "-o", list}, timeout, why);
  if (!why.empty()) return {};
  std::vector<AllocationNode> nodes = parse_scontrol_nodes(text);
  if (nodes.empty()) why = fmt::format("scontrol listed no node of the allocation {}", list);
  return nodes;
}

}  // namespace tessel::dist
