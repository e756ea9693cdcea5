#include "dist/host_reachability.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

#include "core/error.h"

namespace tessel::dist {

std::vector<std::string> hostfile_hosts(const std::string& text) {
  std::vector<std::string> hosts;
  std::istringstream lines(text);
  std::string line;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    if (const auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string host;
    if (!(words >> host)) continue;
    if (const auto at = host.rfind('@'); at != std::string::npos) host = host.substr(at + 1);
    const bool plausible =
        !host.empty() && host.find('=') == std::string::npos &&
        std::all_of(host.begin(), host.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ||
                 c == ':';
        });
    if (!plausible) {
      throw UsageError(fmt::format("host file line {}: '{}' is not a host name or address (expected "
                                   "`hostname slots=N`)",
                                   number, host));
    }
    if (std::find(hosts.begin(), hosts.end(), host) == hosts.end()) hosts.push_back(host);
  }
  return hosts;
}

namespace {

struct Attempt {
  int fd = -1;
  bool done = false;
};

// Starts a nonblocking connect; finishes `answer` at once where it can.
Attempt start_connect(const std::string& host, int port, HostAnswer& answer) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    answer.detail = fmt::format("name does not resolve ({})", ::gai_strerror(rc));
    return {-1, true};
  }
  Attempt attempt;
  const int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    answer.detail = fmt::format("cannot make a socket ({})", std::strerror(errno));
    ::freeaddrinfo(found);
    return {-1, true};
  }
  const int connected = ::connect(fd, found->ai_addr, found->ai_addrlen);
  const int err = errno;
  ::freeaddrinfo(found);
  if (connected == 0 || err == ECONNREFUSED) {
    answer.answered = true;
    answer.detail = connected == 0 ? "connected" : "connection refused";
    ::close(fd);
    return {-1, true};
  }
  if (err != EINPROGRESS) {
    answer.detail = std::strerror(err);
    ::close(fd);
    return {-1, true};
  }
  attempt.fd = fd;
  return attempt;
}

}  // namespace

std::vector<HostAnswer> probe_hosts(const std::vector<std::string>& hosts, int port,
                                    std::chrono::milliseconds timeout) {
  std::vector<HostAnswer> answers(hosts.size());
  std::vector<Attempt> attempts(hosts.size());
  for (size_t i = 0; i < hosts.size(); ++i) {
    answers[i].host = hosts[i];
    attempts[i] = start_connect(hosts[i], port, answers[i]);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::vector<pollfd> waiting;
    std::vector<size_t> which;
    for (size_t i = 0; i < attempts.size(); ++i) {
      if (attempts[i].done) continue;
      waiting.push_back({attempts[i].fd, POLLOUT, 0});
      which.push_back(i);
    }
    if (waiting.empty()) break;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    if (::poll(waiting.data(), waiting.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) {
      break;
    }
    for (size_t k = 0; k < waiting.size(); ++k) {
      if (waiting[k].revents == 0) continue;
      const size_t i = which[k];
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(attempts[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
      answers[i].answered = err == 0 || err == ECONNREFUSED;
      answers[i].detail = err == 0 ? "connected" : std::strerror(err);
      if (err == ECONNREFUSED) answers[i].detail = "connection refused";
      ::close(attempts[i].fd);
      attempts[i].done = true;
    }
  }
  const auto seconds = static_cast<double>(timeout.count()) / 1000.0;
  for (size_t i = 0; i < attempts.size(); ++i) {
    if (attempts[i].done) continue;
    ::close(attempts[i].fd);
    answers[i].detail = fmt::format("no answer within {:g} s", seconds);
  }
  return answers;
}

}  // namespace tessel::dist
