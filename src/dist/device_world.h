// The world a rank computes in (SPEC 10): its device, chosen from where it
// sits on its node (device/rank_device.h), and the world communicator that
// moves that device's tensors: on the CPU the host world itself (MPI); on a
// GPU a DeviceCommunicator with NCCL, or with MPI over host copies when
// several ranks share one GPU and the NCCL loaded refuses that (before 2.30;
// 2.30 allows two per GPU with NCCL_MULTI_RANK_GPU_ENABLE=1).
//
// Environment: TESSEL_DEVICE (auto | cpu | cuda), TESSEL_ALLOW_SHARED_GPU=1
// (more ranks than GPUs on a node, for tests), TESSEL_COMM (auto | nccl |
// mpi) for the device path.
#pragma once

#include <c10/core/Device.h>

#include <string>
#include <string_view>
#include <vector>

#include "device/rank_device.h"
#include "dist/communicator.h"
#include "dist/nccl_collectives.h"

namespace tessel::dist {

enum class DeviceCommRequest { Auto, Nccl, Mpi };
// UsageError for anything but auto, nccl, mpi (empty: auto).
DeviceCommRequest parse_device_comm_request(std::string_view value);

struct DeviceCommChoice {
  bool nccl = false;   // else MPI over host copies
  std::string reason;  // for the log
};
// `ranks_per_device`: the most ranks sharing one device anywhere in the
// world; `multi_rank_switch`: NCCL_MULTI_RANK_GPU_ENABLE=1 is set. UsageError
// when NCCL was asked for and cannot serve.
DeviceCommChoice choose_device_comm(DeviceCommRequest request, const NcclInfo& nccl,
                                    int ranks_per_device, bool multi_rank_switch);

// This rank's place on its node: the launcher's local rank and size
// (OMPI_COMM_WORLD_LOCAL_*, MPI_LOCAL*, SLURM_LOCALID with
// SLURM_TASKS_PER_NODE, LOCAL_RANK with LOCAL_WORLD_SIZE), else counted from
// the world's node map.
device::NodePlacement node_placement(const Communicator& world);

// The three variables above, parsed (UsageError naming a bad value), so a
// launcher can refuse a typo before starting any rank.
struct DeviceEnvironment {
  device::DeviceRequest device = device::DeviceRequest::Auto;
  DeviceCommRequest comm = DeviceCommRequest::Auto;
  bool allow_shared = false;
};
DeviceEnvironment device_environment();

struct DeviceWorld {
  c10::Device device = c10::Device(c10::kCPU);
  CommunicatorPtr world;
  std::vector<std::string> log_lines;  // what was chosen and why
};

// Collective over `host_world`: chooses this rank's device (and makes it
// current) and the world communicator for it, from the environment above.
DeviceWorld setup_device_world(CommunicatorPtr host_world);

}  // namespace tessel::dist
