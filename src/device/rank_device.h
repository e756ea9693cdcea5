// Which device a rank computes on (SPEC 10): `cuda:<local rank>` where CUDA
// is present, else the CPU. Pure decisions, tested without a GPU
// (tests/device/rank_device_test.cpp): the launcher's local rank and the
// number of ranks on the node against the devices this process sees.
//
// Production runs one rank per device; more ranks than devices on a node is
// refused unless explicitly allowed (TESSEL_ALLOW_SHARED_GPU=1), which tests
// use to run several ranks on one GPU.
#pragma once

#include <c10/core/Device.h>

#include <string>
#include <string_view>

namespace tessel::device {

// TESSEL_DEVICE: auto (CUDA when present), cpu, or cuda (an error without it).
enum class DeviceRequest { Auto, Cpu, Cuda };
// UsageError naming the variable and the accepted values for anything else.
DeviceRequest parse_device_request(std::string_view value);

// Where a rank sits on its node (dist/node_map.h computes it from the world).
struct NodePlacement {
  int local_rank = 0;
  int local_size = 1;
};

struct RankDevice {
  c10::Device device = c10::Device(c10::kCPU);
  std::string reason;  // one line for the log: why this device
};

// `cuda_devices`: CUDA devices this process sees (0 in a CPU build or without
// a driver); `no_cuda_reason` says why there are none. UsageError when CUDA
// was asked for and is absent, or when the node has more ranks than devices
// and sharing was not allowed.
RankDevice choose_rank_device(DeviceRequest request, NodePlacement placement, int cuda_devices,
                              bool allow_shared, std::string_view no_cuda_reason);

}  // namespace tessel::device
