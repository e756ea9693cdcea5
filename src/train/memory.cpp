#include "train/memory.h"

#include <ATen/ATen.h>

#include <fstream>
#include <sstream>
#include <string>

namespace tessel::train {

int64_t peak_rss_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    int64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

std::vector<int64_t> gather_peak_rss(dist::Communicator& world) {
  const auto mine = at::full({1}, peak_rss_bytes(), at::kLong);
  auto all = at::zeros({world.size()}, at::kLong);
  world.all_gather_into(all, mine);
  std::vector<int64_t> out(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + world.size());
  return out;
}

}  // namespace tessel::train
