#include "gpu/gpu_world.h"

#include <cstdlib>
#include <memory>

#include "core/error.h"

namespace tessel::gpu_testing {

namespace {

enum class GpuWorldState { NotMade, Made, Released };

struct GpuWorldSlot {
  GpuWorldState state = GpuWorldState::NotMade;
  std::unique_ptr<dist::DeviceWorld> world;  // null without a CUDA device
};

GpuWorldSlot& gpu_world_slot() {
  static GpuWorldSlot s;
  return s;
}

// Releases the world after the last test: see gpu_world.h.
class ReleaseGpuWorld : public testing::Environment {
 public:
  void TearDown() override {
    gpu_world_slot().world.reset();
    gpu_world_slot().state = GpuWorldState::Released;
  }
};

[[maybe_unused]] testing::Environment* const release_at_the_end =
    testing::AddGlobalTestEnvironment(new ReleaseGpuWorld);

}  // namespace

const dist::DeviceWorld* gpu_world() {
  GpuWorldSlot& s = gpu_world_slot();
  TESSEL_CHECK(s.state != GpuWorldState::Released, "gpu_world() called after the tests ended");
  if (s.state == GpuWorldState::NotMade) {
    if (device::cuda_device_count() > 0) {
      ::setenv("TESSEL_DEVICE", "cuda", 1);
      ::setenv("TESSEL_ALLOW_SHARED_GPU", "1", 1);
      s.world = std::make_unique<dist::DeviceWorld>(dist::setup_device_world(dist::world()));
    }
    s.state = GpuWorldState::Made;  // after: a world that failed to start is tried again, failing again
  }
  return s.world.get();
}

}  // namespace tessel::gpu_testing
