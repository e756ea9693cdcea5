// AdamW's update of one parameter on a device as one kernel: libtorch 2.x's
// fused AdamW (`at::_fused_adamw_`, what PyTorch's `AdamW(fused=True)`
// runs) instead of the five ATen passes of optim/adamw.cpp. Taken when
// TESSEL_DEVICE_KERNELS=fused (core/device_kernel_choice.h; off until a GPU
// has measured it). Built by the CUDA build (cuda/fused_adamw.cpp); a CPU
// build's libtorch 1.13 has no such kernel (fused_adamw_absent.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "optim/adamw.h"

namespace tessel::optim {

// Whether this build has it.
bool fused_adamw_built();

// Whether it takes these: one device (not the CPU: there the hand-written
// loop of adamw_kernel.h runs), one floating dtype, all contiguous.
bool fused_adamw_applies(const at::Tensor& p, const at::Tensor& grad, const AdamWParamState& state);

// The update of AdamW::step for step number `step` (counted from 1), the
// gradient read as grad * grad_scale (grad itself is left as it is).
void fused_adamw_update(const at::Tensor& p, const at::Tensor& grad, AdamWParamState& state,
                        const AdamWOptions& options, int64_t step, double grad_scale);

}  // namespace tessel::optim
