#include "dist/timeout.h"

#include <fmt/format.h>

#include <regex>

#include "core/env_duration.h"

namespace tessel::dist {

std::chrono::milliseconds default_collective_timeout() {
  return seconds_from_env("TESSEL_COLLECTIVE_TIMEOUT_S", std::chrono::seconds(300));
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

std::optional<TimedOutCollective> parse_timeout_message(std::string_view line) {
  // The fixed words of timeout_message() above; a rank's line may arrive with
  // a launcher's prefix (mpirun --tag-output) before "tessel:".
  static const std::regex pattern(
      R"(tessel: collective (\S+) on group '([^']*)' did not finish within (\S+ s) on rank (\d{1,9}):)");
  std::match_results<std::string_view::const_iterator> match;
  if (!std::regex_search(line.begin(), line.end(), match, pattern)) return std::nullopt;
  TimedOutCollective found;
  found.collective = match[1].str();
  found.group = match[2].str();
  found.limit = match[3].str();
  found.world_rank = std::stoi(match[4].str());
  return found;
}

}  // namespace tessel::dist
