// A host tensor moved to a device without the host waiting for the device.
//
// Tensor::to from ordinary (pageable) host memory waits until everything
// queued on the device before it has run: a training step that moves a micro
// batch's tensors that way stalls the device and refills its queue each
// time. Staged through page-locked memory the copy is queued on the current
// stream like any kernel; the caching host allocator keeps the stage until
// the copy has run, so the staged tensor may be dropped at once.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace tessel {

// `t` on `device`: from the CPU to another device without waiting, anything
// else (already there, to the CPU, undefined) as Tensor::to would.
at::Tensor to_device_without_waiting(const at::Tensor& t, c10::Device device);

}  // namespace tessel
