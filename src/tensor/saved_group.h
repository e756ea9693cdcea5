// Keeping a communicator in an autograd context for backward. The context
// stores only IValues, and a CommunicatorPtr is not one; an IValue capsule
// holding an intrusive pointer to a small holder is (libtorch 1.13 and 2.x).
// Internal to the tensor layer.
#pragma once

#include <ATen/core/ivalue.h>

#include "dist/communicator.h"

namespace tessel::tensor::detail {

at::IValue save_group(dist::CommunicatorPtr group);
dist::CommunicatorPtr load_group(const at::IValue& saved);

}  // namespace tessel::tensor::detail
