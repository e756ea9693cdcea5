#include "train/memory.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "core/counting_allocator.h"
#include "device/backend.h"
#include "train/model_setup.h"

namespace tessel::train {

namespace {

// The value of a "Name:   123 kB" line of /proc/self/status, in bytes.
int64_t status_bytes(const char* field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  const std::string prefix = std::string(field) + ":";
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream fields(line.substr(prefix.size()));
    int64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

std::string gib(int64_t b) { return fmt::format("{:.2f} GiB", static_cast<double>(b) / (1024.0 * 1024.0 * 1024.0)); }

}  // namespace

std::vector<int64_t> gather_values(dist::Communicator& world, const std::vector<int64_t>& mine) {
  const auto n = static_cast<int64_t>(mine.size());
  const auto local = at::tensor(mine, at::kLong);
  auto all = at::zeros({world.size() * n}, at::kLong);
  world.all_gather_into(all, local);
  return std::vector<int64_t>(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + all.numel());
}

int64_t peak_rss_bytes() { return status_bytes("VmHWM"); }

bool device_peak_measured(c10::Device device) {
  return !device.is_cpu() || CountingCpuAllocator::installed();
}

int64_t peak_device_bytes(c10::Device device) {
  if (device.is_cpu()) return CountingCpuAllocator::installed() ? CountingCpuAllocator::peak_bytes() : 0;
  const device::Backend* backend = device::backend_for(device);
  return backend != nullptr
             ? backend->memory_stats(device.index() < 0 ? 0 : device.index()).peak_allocated
             : 0;
}
int64_t current_rss_bytes() { return status_bytes("VmRSS"); }
int64_t shared_rss_bytes() { return status_bytes("RssShmem"); }


MemoryReport memory_report(dist::Communicator& world) {
  const auto all = gather_values(world, {current_rss_bytes(), peak_rss_bytes()});
  MemoryReport r;
  for (size_t i = 0; i + 1 < all.size(); i += 2) {
    r.rss.push_back(all[i]);
    r.peak_rss.push_back(all[i + 1]);
  }
  return r;
}

std::string setup_memory_line(const ShardedModel& model, const MemoryReport& report) {
  const int64_t shard_bytes = model.local_param_bytes();
  // Gradients and the two AdamW moments exist for what the optimizer
  // updates: the shards, or split over replicas only this replica's part.
  int64_t updated_bytes = 0;
  for (const auto& t : model.optimizer_params()) updated_bytes += t.numel() * static_cast<int64_t>(t.element_size());
  const auto [lo, hi] = std::minmax_element(report.rss.begin(), report.rss.end());
  const int64_t peak = report.peak_rss.empty() ? 0 : *std::max_element(report.peak_rss.begin(), report.peak_rss.end());
  return fmt::format(
      "after load and sharding: RSS per rank {} to {} (peak so far {}); rank 0's fp32 shards {}, with gradients "
      "and AdamW state {} (the sharded state the first step adds up to)",
      gib(report.rss.empty() ? 0 : *lo), gib(report.rss.empty() ? 0 : *hi), gib(peak), gib(shard_bytes),
      gib(shard_bytes + 3 * updated_bytes));
}

}  // namespace tessel::train
