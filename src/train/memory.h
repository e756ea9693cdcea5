// Peak memory of this process, for the per-step metrics (SPEC 6). On a CPU
// build the meaningful number is the resident set's high-water mark (VmHWM in
// /proc/self/status): it includes libtorch's allocator caches and MPI
// buffers, which is what actually limits how large a model fits per rank.
#pragma once

#include <cstdint>
#include <vector>

#include "dist/communicator.h"

namespace tessel::train {

// VmHWM in bytes; 0 where /proc is unavailable.
int64_t peak_rss_bytes();

// Every rank's peak_rss_bytes(), in world-rank order (collective over `world`).
std::vector<int64_t> gather_peak_rss(dist::Communicator& world);

}  // namespace tessel::train
