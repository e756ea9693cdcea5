#include "dist/nonblocking_all_reduce_choice.h"

#include <cstdlib>

namespace tessel::dist {

const char* choose_nonblocking_all_reduce() {
  const char* set = std::getenv(kNonblockingAllReduceVariable);
  if (set == nullptr || *set == '\0') {
    ::setenv(kNonblockingAllReduceVariable, kReduceScatterAllGatherSchedule, /*overwrite=*/1);
  }
  return std::getenv(kNonblockingAllReduceVariable);
}

}  // namespace tessel::dist
