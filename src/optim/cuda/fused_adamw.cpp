// optim/fused_adamw.h in the CUDA build (libtorch 2.x): one parameter per
// call of at::_fused_adamw_, so AdamW::step can still hand each updated
// parameter on at once (its `updated` callback) rather than after all.
#include "optim/fused_adamw.h"

#include <ATen/ATen.h>
#include <ATen/ops/_fused_adamw.h>

namespace tessel::optim {

bool fused_adamw_built() { return true; }

bool fused_adamw_applies(const at::Tensor& p, const at::Tensor& grad, const AdamWParamState& state) {
  if (p.device().is_cpu() || !at::isFloatingType(p.scalar_type())) return false;
  // The kernel refuses (TORCH_CHECK) tensors whose sizes or strides differ
  // from the parameter's, which is_contiguous alone does not rule out (a
  // size-1 dimension's stride).
  for (const at::Tensor* t : {&p, &grad, &state.exp_avg, &state.exp_avg_sq}) {
    if (!t->defined() || t->device() != p.device() || t->scalar_type() != p.scalar_type() || !t->is_contiguous() ||
        t->sizes() != p.sizes() || t->strides() != p.strides())
      return false;
  }
  return true;
}

void fused_adamw_update(const at::Tensor& p, const at::Tensor& grad, AdamWParamState& state,
                        const AdamWOptions& o, int64_t step, double grad_scale) {
  // The kernel reads the step count from device memory (PyTorch keeps it
  // there so that no step waits for the host); a float32 scalar, as PyTorch's.
  const at::Tensor steps = at::full({}, static_cast<double>(step), p.options().dtype(at::kFloat));
  // Its own grad_scale divides and writes the result back into the
  // gradient; AdamW::step promises to leave gradients alone, so the scaled
  // gradient is a temporary instead (only when clipping scales at all).
  const at::Tensor g = grad_scale == 1.0 ? grad : grad.mul(grad_scale);
  at::_fused_adamw_({p}, {g}, {state.exp_avg}, {state.exp_avg_sq}, {}, {steps}, o.lr, o.beta1, o.beta2,
                    o.weight_decay, o.eps, /*amsgrad=*/false, /*maximize=*/false);
}

}  // namespace tessel::optim
