// TESSEL_DEVICE_KERNELS: whether a device computes with tessel's own fused
// paths (nn/device_kernels.h: RMSNorm, rotary, the SiLU product;
// optim/fused_adamw.h: AdamW as one kernel per parameter; and
// nn/varlen_attention.h: packed documents and windows in one call of the
// library's variable-length flash kernel) or with ATen's compositions. One
// switch for all of them, read by each layer that has such a path, so here,
// below them all. Off by default until a GPU has
// measured them (issue 40).
#pragma once

namespace tessel {

// The choice, given whether the asking layer's fused path is built: unset
// or "aten" -> false; "fused" -> true, or a UsageError when it is not built
// (a CPU build, or a CUDA build without nvcc); anything else -> a
// UsageError listing the values.
bool use_device_kernels(const char* choice, bool built);

// use_device_kernels for this process's environment (read at each call:
// cheap next to a kernel, and a test can switch it).
bool device_kernels_chosen(bool built);

}  // namespace tessel
