// Which files of a directory were opened or read while a test ran, seen by
// the kernel (inotify), not by the code under test: a test that must show
// tessel opened nothing outside a checkpoint watches the directory holding
// the files it must not touch. Stat and link lookups are not opens, so they
// are not reported; any open() or read() of a file there is, whatever the
// mount's access-time settings.
#pragma once

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessel::test_support {

class OpenWatch {
 public:
  explicit OpenWatch(const std::filesystem::path& dir)
      : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    if (fd_ < 0) throw std::runtime_error(std::string("inotify_init1: ") + std::strerror(errno));
    if (::inotify_add_watch(fd_, dir.c_str(), IN_OPEN | IN_ACCESS) < 0) {
      const std::string why = std::strerror(errno);
      ::close(fd_);
      throw std::runtime_error("inotify_add_watch " + dir.string() + ": " + why);
    }
  }
  ~OpenWatch() { ::close(fd_); }
  OpenWatch(const OpenWatch&) = delete;
  OpenWatch& operator=(const OpenWatch&) = delete;

  // The names opened or read in the directory since the last call ("." for
  // the directory itself), one per event. The kernel queues an event within
  // the open or read call, so what has returned is here.
  std::vector<std::string> touched() {
    std::vector<std::string> out;
    alignas(inotify_event) char buffer[8192];
    for (;;) {
      const ssize_t n = ::read(fd_, buffer, sizeof buffer);
      if (n <= 0) break;
      for (ssize_t at = 0; at < n;) {
        const auto* event = reinterpret_cast<const inotify_event*>(buffer + at);
        out.emplace_back(event->len > 0 ? event->name : ".");
        at += static_cast<ssize_t>(sizeof(inotify_event) + event->len);
      }
    }
    return out;
  }

 private:
  int fd_;
};

}  // namespace tessel::test_support
