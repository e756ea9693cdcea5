#include "core/env_duration.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"

namespace tessel {

std::chrono::milliseconds seconds_from_env(const char* name, std::chrono::milliseconds fallback) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return fallback;
  char* end = nullptr;
  const double seconds = std::strtod(env, &end);
  if (end == env || *end != '\0' || !std::isfinite(seconds) || seconds <= 0) {
    throw UsageError(fmt::format("{}='{}' is not a positive number of seconds; set it to e.g. 30, "
                                 "or unset it for the default of {:g} s",
                                 name, env, static_cast<double>(fallback.count()) / 1000.0));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000.0)));
}

}  // namespace tessel
