// Shared by the GPU tests (tests/gpu/): the device world of this process and
// meshes on it. The world is made once, by the first test that needs it, on
// every rank at the same point (tests run in the same order everywhere):
// TESSEL_DEVICE=cuda and TESSEL_ALLOW_SHARED_GPU=1, so several ranks may
// share the one GPU of a test machine (their device collectives then take
// whatever path dist/device_world.h chooses: NCCL where it allows, MPI over
// host copies otherwise). Without a CUDA device every test skips, saying why.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "device/backend.h"
#include "dist/communicator.h"
#include "dist/device_communicator.h"
#include "dist/device_mesh.h"
#include "dist/device_world.h"

namespace tessel::gpu_testing {

// Null without a CUDA device. Made by the first test that needs it and
// released when the tests end (gpu_world.cpp: a gtest environment's TearDown,
// on every rank in the same order), before MPI is finalized and CUDA is torn
// down at exit: none of its NCCL communicators, nor the thread that watches
// them (dist/collective_watch.h), is left polling a runtime that is going
// away, as tessel's own commands release theirs before they return.
const dist::DeviceWorld* gpu_world();

// The world's device path, for messages: which backend the tests ran on.
inline std::string device_path() {
  const auto* w = gpu_world();
  const auto* d = w ? dynamic_cast<const dist::DeviceCommunicator*>(w->world.get()) : nullptr;
  return d ? d->device_path() : "none";
}

#define TESSEL_REQUIRE_GPU()                                                  \
  if (::tessel::gpu_testing::gpu_world() == nullptr) {                        \
    GTEST_SKIP() << "no CUDA device: " << ::tessel::device::no_cuda_reason(); \
  }

// A mesh of `sizes.world_size` ranks on this rank's block of the world (the
// world split into consecutive blocks of that many ranks, each running its
// own copy), computing on the GPU or on the CPU (the host world's block).
// Collective over the world.
inline dist::DeviceMesh block_mesh(dist::MeshSizes sizes, bool on_gpu) {
  const dist::DeviceWorld& w = *gpu_world();
  const dist::CommunicatorPtr& world = on_gpu ? w.world : dist::world();
  const int n = sizes.world_size;
  const dist::CommunicatorPtr group =
      n == world->size() ? world
                         : world->split(world->rank() / n, world->rank() % n,
                                        (on_gpu ? "gpu_block" : "cpu_block") + std::to_string(n));
  return dist::DeviceMesh(dist::MeshLayout(sizes), group,
                          on_gpu ? w.device : c10::Device(c10::kCPU));
}

inline dist::DeviceMesh single_rank_mesh(bool on_gpu) {
  dist::MeshSizes one;
  one.world_size = 1;
  return block_mesh(one, on_gpu);
}

}  // namespace tessel::gpu_testing
