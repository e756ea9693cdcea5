#include "dist/timeout.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace tessel::dist {

std::chrono::milliseconds default_collective_timeout() {
  const char* env = std::getenv("TESSEL_COLLECTIVE_TIMEOUT_S");
  if (env == nullptr || *env == '\0') return std::chrono::seconds(300);
  char* end = nullptr;
  const double seconds = std::strtod(env, &end);
  if (end == env || *end != '\0' || !std::isfinite(seconds) || seconds <= 0) {
    throw UsageError(fmt::format(
        "TESSEL_COLLECTIVE_TIMEOUT_S='{}' is not a positive number of seconds; set it to e.g. "
        "300, or unset it for the default of 300 s",
        env));
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000.0)));
}

std::string timeout_message(const std::string& collective, const std::string& group,
                            std::chrono::milliseconds timeout, int world_rank) {
  const int64_t ms = timeout.count();
  const std::string limit =
      ms % 1000 == 0 ? fmt::format("{} s", ms / 1000) : fmt::format("{:.3g} s", ms / 1000.0);
  return fmt::format(
      "tessel: collective {} on group '{}' did not finish within {} on rank {}: a peer process "
      "likely died or hangs. Set TESSEL_COLLECTIVE_TIMEOUT_S to change the limit.",
      collective, group, limit, world_rank);
}

}  // namespace tessel::dist
