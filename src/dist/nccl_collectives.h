// NCCL, the device collectives of the CUDA build (dist/cuda/nccl_collectives.cpp;
// a CPU build links dist/nccl_absent.cpp, whose answers say NCCL is absent).
// MPI stays the launcher and the bootstrap: the world's NCCL unique id is
// broadcast over the host world, and every group after that is an
// ncclCommSplit of its parent, made when the DeviceCommunicator splits.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "dist/collective_watch.h"
#include "dist/device_collectives.h"

namespace tessel::dist {

struct NcclInfo {
  bool available = false;
  int version_code = 0;  // ncclGetVersion's, e.g. 22809 for 2.28.9
  std::string version;   // "2.28.9"
  std::string reason;    // why unavailable
};

// The NCCL this process loaded (ncclGetVersion at run time, not the header's).
NcclInfo nccl_info();

// The world's NCCL communicator on CUDA device `device_index`, over the
// ranks of `host_world` (collective over it). Its collectives run on streams
// of their own, timed by `watch`.
std::shared_ptr<DeviceCollectives> make_nccl_world(Communicator& host_world, int device_index,
                                                   std::shared_ptr<CollectiveWatch> watch);

}  // namespace tessel::dist
