// DeviceCollectives: a communication library's collectives on device memory
// for one group (NCCL in the CUDA build: dist/cuda/nccl_collectives.cpp),
// behind the Communicator interface so its calls, checks and counters are the
// same as every backend's. It is used through a DeviceCommunicator, which
// keeps the group's host communicator beside it (device_communicator.h):
// host tensors and barriers go there, and a split needs the host group's
// members, so it is split_like() the host child rather than split().
#pragma once

#include <memory>
#include <string>

#include "dist/communicator_base.h"

namespace tessel::dist {

class DeviceCollectives : public CommunicatorBase {
 public:
  using CommunicatorBase::CommunicatorBase;

  // The group of `host_child`, the split of this group's host communicator
  // with the same color, key and `name` (the caller's name, without ranks).
  // Collective over this group.
  virtual std::shared_ptr<DeviceCollectives> split_like(const Communicator& host_child, int color,
                                                        int key, const std::string& name) = 0;
  // e.g. "NCCL 2.28.9"
  virtual std::string backend() const = 0;

  CommunicatorPtr split(int color, int key, const std::string& name) override;
};

}  // namespace tessel::dist
