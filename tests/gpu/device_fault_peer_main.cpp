// A small MPI program for device_faults_test.cpp, the device's counterpart of
// tests/dist/fault_peer_main.cpp: ranks sharing the GPU all-reduce a device
// tensor on a named group of the device world (NCCL where the version
// allows, else MPI over host copies: dist/device_world.h), and one rank
// misbehaves; the others must not wait forever.
//   device_fault_peer hang  - rank 1 sleeps instead of joining the collective
//   device_fault_peer kill  - rank 1 dies (SIGKILL) instead of joining
//   device_fault_peer throw - rank 1 throws between two all-reduces, ending as
//                             the tessel program does (dist::end_job_after_error)
//   device_fault_peer ok    - everyone joins (the control case)
// Exits 0 only when the all-reduce completed on this rank with the right sum.
// TESSEL_DEVICE=cpu runs the same on the host world (a check of the program).
#include <ATen/ATen.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/error.h"
#include "dist/communicator.h"
#include "dist/device_communicator.h"
#include "dist/device_world.h"

namespace {

constexpr const char* kUsage =
    "usage: device_fault_peer hang|kill|throw|ok   (under mpirun, 2 or more ranks)\n";

int run(const char* mode) {
  ::setenv("TESSEL_DEVICE", std::getenv("TESSEL_DEVICE") ? std::getenv("TESSEL_DEVICE") : "cuda",
           1);
  ::setenv("TESSEL_ALLOW_SHARED_GPU", "1", 0);  // unless the test says 0: the refusal's case
  const tessel::dist::DeviceWorld device_world =
      tessel::dist::setup_device_world(tessel::dist::world());
  const tessel::dist::CommunicatorPtr& world = device_world.world;
  const auto* on_device = dynamic_cast<const tessel::dist::DeviceCommunicator*>(world.get());
  if (world->rank() == 0) {
    std::fprintf(stderr, "device_fault_peer: %d ranks on %s, path %s\n", world->size(),
                 device_world.device.str().c_str(),
                 on_device ? on_device->device_path().c_str() : "host");
  }
  auto group = world->split(0, world->rank(), "hang_group");
  const bool bad_rank = world->rank() == 1;
  if (bad_rank && std::strcmp(mode, "hang") == 0) {
    std::this_thread::sleep_for(std::chrono::seconds(120));
    return 3;
  }
  if (bad_rank && std::strcmp(mode, "kill") == 0) std::raise(SIGKILL);
  const at::TensorOptions on(device_world.device);
  if (std::strcmp(mode, "throw") == 0) {
    at::Tensor first = at::ones({10}, on);
    group->all_reduce(first);  // the sequence has begun on every rank
    if (bad_rank) throw tessel::Error("device_fault_peer: rank 1 failed between two collectives");
  }
  at::Tensor t = at::ones({1000}, on);
  group->all_reduce(t);
  // Reading the sum waits for the collective on the device.
  const bool right = t.eq(static_cast<float>(world->size())).all().item<bool>();
  std::fprintf(stderr, "device_fault_peer rank %d: all_reduce finished (%s)\n", world->rank(),
               right ? "correct" : "WRONG");
  tessel::dist::shutdown();
  return right ? 0 : 4;
}

}  // namespace

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  // Before MPI and the device: a wrong mode (or --help, the carried build's
  // load check) says how to call it.
  if (std::strcmp(mode, "hang") != 0 && std::strcmp(mode, "kill") != 0 &&
      std::strcmp(mode, "throw") != 0 && std::strcmp(mode, "ok") != 0) {
    std::fprintf(stderr, "%s", kUsage);
    return std::strcmp(mode, "--help") == 0 ? 0 : 2;
  }
  try {
    return run(mode);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "device_fault_peer: error%s: %s\n", tessel::dist::rank_label().c_str(),
                 e.what());
    return tessel::dist::end_job_after_error(5);
  }
}
