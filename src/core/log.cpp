#include "core/log.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace tessel::log {
namespace {

struct State {
  int rank = 0;
  int world_size = 1;
  Level level = Level::Info;
  bool all_ranks = false;
  std::mutex mutex;
};

State& state() {
  // Built in place: State holds a mutex, so it cannot be returned from a lambda.
  static State s;
  static const bool level_from_env = [] {
    if (const char* env = std::getenv("TESSEL_LOG_LEVEL")) {
      std::string v(env);
      if (v == "debug") s.level = Level::Debug;
      if (v == "warn") s.level = Level::Warn;
      if (v == "error") s.level = Level::Error;
    }
    return true;
  }();
  (void)level_from_env;
  return s;
}

const char* tag(Level level) {
  switch (level) {
    case Level::Debug: return "debug";
    case Level::Info: return "info";
    case Level::Warn: return "warning";
    case Level::Error: return "error";
  }
  return "";
}

}  // namespace

void set_rank(int rank, int world_size) {
  state().rank = rank;
  state().world_size = world_size;
}
void set_level(Level level) { state().level = level; }
void set_all_ranks(bool all_ranks) { state().all_ranks = all_ranks; }

void write(Level level, const std::string& message) {
  State& s = state();
  if (level < s.level) return;
  if (level <= Level::Info && s.rank != 0 && !s.all_ranks) return;
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.world_size > 1) {
    std::fprintf(stderr, "[tessel %s rank %d] %s\n", tag(level), s.rank, message.c_str());
  } else {
    std::fprintf(stderr, "[tessel %s] %s\n", tag(level), message.c_str());
  }
  std::fflush(stderr);
}

}  // namespace tessel::log
