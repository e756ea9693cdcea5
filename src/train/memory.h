// Memory of this process, as the OS counts it, for the per-step metrics and
// the line a run logs after setup (SPEC 6). On a CPU build the meaningful
// numbers are the resident set (VmRSS) and its high-water mark (VmHWM) in
// /proc/self/status: they include libtorch's allocator caches and MPI
// buffers, which is what actually limits how large a model fits per rank.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <c10/core/Device.h>

#include "dist/communicator.h"

namespace tessel::train {

struct ShardedModel;

// VmHWM / VmRSS in bytes; 0 where /proc is unavailable.
int64_t peak_rss_bytes();
// The high-water mark of `device`'s allocator (bytes given to tensors since
// the process started). On the CPU only where the tessel program counts
// tensor bytes (TESSEL_COUNT_TENSOR_BYTES=1, core/counting_allocator.h):
// the figure to set against `tessel plan --predict`'s tensor terms, which
// the RSS exceeds by the allocator's retained pages. 0 where not measured.
int64_t peak_device_bytes(c10::Device device);
bool device_peak_measured(c10::Device device);
int64_t current_rss_bytes();
// The part of VmRSS that is shared memory (RssShmem): node-shared parameters,
// MPI's shared-memory segments.
int64_t shared_rss_bytes();

// Each rank's `mine` (the same length on every rank), concatenated in
// world-rank order (collective over `world`).
std::vector<int64_t> gather_values(dist::Communicator& world, const std::vector<int64_t>& mine);

// Every rank's VmRSS and VmHWM now, in world-rank order (collective).
struct MemoryReport {
  std::vector<int64_t> rss;
  std::vector<int64_t> peak_rss;
};
MemoryReport memory_report(dist::Communicator& world);

// "after load and sharding: RSS per rank ... ; sharded state per rank ...":
// what the OS measured against what the layout promises (this rank's fp32
// shards, and with gradients and AdamW's two moments, 4x that).
std::string setup_memory_line(const ShardedModel& model, const MemoryReport& report);

}  // namespace tessel::train
