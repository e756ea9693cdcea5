// Logging: plain lines on stderr, prefixed with the rank when more than one
// process runs. By default only rank 0 speaks (a run of 8 ranks should not
// print everything 8 times); warnings and errors come from every rank.
#pragma once

#include <fmt/format.h>

#include <string>

namespace tessel::log {

enum class Level { Debug = 0, Info = 1, Warn = 2, Error = 3 };

// Set once at start-up (after the communicator knows the rank).
void set_rank(int rank, int world_size);
void set_level(Level level);
void set_all_ranks(bool all_ranks);  // let every rank print info lines
void write(Level level, const std::string& message);

template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::Debug, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::Info, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::Warn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  write(Level::Error, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace tessel::log
