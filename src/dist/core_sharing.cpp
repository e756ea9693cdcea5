#include "dist/core_sharing.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "core/error.h"

namespace tessel::dist {

std::string this_machine_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id;
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

CoreSharing core_sharing(const std::vector<std::string>& machine_ids, int my_rank, int cores) {
  TESSEL_CHECK(my_rank >= 0 && my_rank < static_cast<int>(machine_ids.size()), "rank {} of {} machine ids", my_rank,
               machine_ids.size());
  CoreSharing s;
  s.cores = std::max(1, cores);
  const std::string& mine = machine_ids[static_cast<std::size_t>(my_rank)];
  if (!mine.empty()) {
    s.ranks_on_machine = static_cast<int>(std::count(machine_ids.begin(), machine_ids.end(), mine));
  }
  return s;
}

}  // namespace tessel::dist
