// A CPU build's answer to optim/fused_adamw.h: its libtorch (1.13) has no
// fused AdamW kernel.
#include "optim/fused_adamw.h"

#include "core/error.h"

namespace tessel::optim {

bool fused_adamw_built() { return false; }

bool fused_adamw_applies(const at::Tensor&, const at::Tensor&, const AdamWParamState&) { return false; }

void fused_adamw_update(const at::Tensor&, const at::Tensor&, AdamWParamState&, const AdamWOptions&, int64_t,
                        double) {
  throw Error("fused AdamW: tessel was built without CUDA (build the cuda preset: scripts/cuda.sh)");
}

}  // namespace tessel::optim
