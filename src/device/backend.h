// What a kind of compute device gives tessel beyond ATen's tensors: how many
// devices there are, making one current, its memory counters and its
// streams. The CPU needs none of it (no backend). The CUDA build's backend
// lives in device/cuda/; a CPU build links device/cuda_absent.cpp instead,
// whose cuda_backend() is null and says why (ARCHITECTURE.md "device code").
#pragma once

#include <c10/core/Device.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "device/stream_ops.h"

namespace tessel::device {

// The device allocator's own counters (bytes): allocated to tensors now and
// at most since the last reset, reserved from the device now and at most.
struct MemoryStats {
  int64_t allocated = 0;
  int64_t peak_allocated = 0;
  int64_t reserved = 0;
  int64_t peak_reserved = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  // Devices this process can use; 0 when the driver finds none.
  virtual int device_count() const = 0;
  // Why device_count() is 0, e.g. "no CUDA driver found"; empty otherwise.
  virtual std::string unavailable_reason() const = 0;
  virtual void set_current_device(int index) const = 0;
  // e.g. "NVIDIA H200, 139.8 GiB, compute capability 9.0"
  virtual std::string describe(int index) const = 0;
  virtual void synchronize(int index) const = 0;
  virtual MemoryStats memory_stats(int index) const = 0;
  virtual void reset_peak_memory(int index) const = 0;
  virtual StreamOps& stream_ops() const = 0;
  // Where a profiler attached to the process with collection off at start
  // collects (CUDA: cudaProfilerStart/Stop, which `ncu --profile-from-start
  // off` honours); without such a profiler, nothing happens.
  virtual void start_profiler_range() const = 0;
  virtual void stop_profiler_range() const = 0;
  // Runs `fn` on this thread and returns, for each operation in it that made
  // the host wait for the device, the call stack it was asked from (CUDA: the
  // calls c10's sync debug mode reports: a copy from or to pageable memory,
  // reading a value, synchronizing a stream or the device). Waits inside a
  // backward pass are reported where backward() returns them. For tests and
  // diagnostics: nothing else should use the device meanwhile.
  virtual std::vector<std::string> host_waits_during(const std::function<void()>& fn) const = 0;
};

// The CUDA backend, or null in a build without CUDA.
const Backend* cuda_backend();
// Why cuda_backend() is null, or why it has no device.
std::string no_cuda_reason();
// Devices cuda_backend() sees (0 without one).
int cuda_device_count();

// The backend of a device that needs one: null for the CPU; tessel::Error for
// a device kind this build has no backend for.
const Backend* backend_for(c10::Device device);

// Blocks until `device` has finished the work issued to it (no-op on the CPU).
void synchronize(c10::Device device);

// Opens or closes `device`'s profiler range (Backend above) once the work
// issued so far has finished, so that exactly the work issued in between
// falls inside. False on the CPU, which has no such range.
bool mark_profiler_range(c10::Device device, bool start);

}  // namespace tessel::device
