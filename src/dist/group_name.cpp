#include "dist/group_name.h"

#include <fmt/format.h>

namespace tessel::dist {

std::string format_group_name(const std::string& name, const std::vector<int>& world_ranks) {
  std::string ranks;
  const bool compress = world_ranks.size() > 16;
  for (size_t i = 0; i < world_ranks.size();) {
    size_t j = i;
    if (compress) {
      while (j + 1 < world_ranks.size() && world_ranks[j + 1] == world_ranks[j] + 1) ++j;
    }
    if (!ranks.empty()) ranks += ',';
    if (j >= i + 2) {
      ranks += fmt::format("{}-{}", world_ranks[i], world_ranks[j]);
      i = j + 1;
    } else {
      ranks += fmt::format("{}", world_ranks[i]);
      i += 1;
    }
  }
  return fmt::format("{} (ranks {})", name, ranks);
}

}  // namespace tessel::dist
