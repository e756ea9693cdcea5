#include "device/rank_device.h"

#include <fmt/format.h>

#include "core/error.h"

namespace tessel::device {

DeviceRequest parse_device_request(std::string_view value) {
  if (value.empty() || value == "auto") return DeviceRequest::Auto;
  if (value == "cpu") return DeviceRequest::Cpu;
  if (value == "cuda") return DeviceRequest::Cuda;
  throw UsageError(fmt::format(
      "TESSEL_DEVICE='{}' is not a device kind; use auto (CUDA when present, else the CPU), "
      "cpu or cuda",
      value));
}

RankDevice choose_rank_device(DeviceRequest request, NodePlacement placement, int cuda_devices,
                              bool allow_shared, std::string_view no_cuda_reason) {
  TESSEL_CHECK(placement.local_size >= 1 && placement.local_rank >= 0 &&
                   placement.local_rank < placement.local_size,
               "local rank {} of {} ranks on the node is not a place on it", placement.local_rank,
               placement.local_size);
  if (request == DeviceRequest::Cpu) return {c10::Device(c10::kCPU), "TESSEL_DEVICE=cpu"};
  if (cuda_devices <= 0) {
    if (request == DeviceRequest::Cuda) {
      throw UsageError(fmt::format(
          "TESSEL_DEVICE=cuda, but {}; unset it (or set cpu) to train on the CPU", no_cuda_reason));
    }
    return {c10::Device(c10::kCPU), fmt::format("no CUDA device ({})", no_cuda_reason)};
  }
  if (placement.local_size <= cuda_devices) {
    return {c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(placement.local_rank)),
            fmt::format("local rank {} of {} on a node with {} CUDA device{}", placement.local_rank,
                        placement.local_size, cuda_devices, cuda_devices == 1 ? "" : "s")};
  }
  if (!allow_shared) {
    throw UsageError(
        fmt::format("{} ranks on this node but only {} CUDA device{}: tessel runs one rank per "
                    "device; start at most {} "
                    "rank{} per node (--nproc, cluster.gpus_per_node), or set "
                    "TESSEL_ALLOW_SHARED_GPU=1 to let ranks share "
                    "devices (for tests: slower, and collectives then go through MPI unless NCCL "
                    "allows several ranks per "
                    "device)",
                    placement.local_size, cuda_devices, cuda_devices == 1 ? "" : "s", cuda_devices,
                    cuda_devices == 1 ? "" : "s"));
  }
  const int index = placement.local_rank % cuda_devices;
  return {c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index)),
          fmt::format("local rank {} of {} shares CUDA device {} of {} (TESSEL_ALLOW_SHARED_GPU=1)",
                      placement.local_rank, placement.local_size, index, cuda_devices)};
}

}  // namespace tessel::device
