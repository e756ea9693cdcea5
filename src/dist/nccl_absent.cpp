// The CPU build's answer to dist/nccl_collectives.h (the CUDA build links
// dist/cuda/nccl_collectives.cpp instead).
#include "core/error.h"
#include "dist/nccl_collectives.h"

namespace tessel::dist {

NcclInfo nccl_info() {
  NcclInfo info;
  info.reason = "this tessel was built without CUDA, so without NCCL";
  return info;
}

std::shared_ptr<DeviceCollectives> make_nccl_world(Communicator&, int,
                                                   std::shared_ptr<CollectiveWatch>) {
  throw Error(nccl_info().reason);
}

}  // namespace tessel::dist
