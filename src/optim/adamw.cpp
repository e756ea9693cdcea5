#include "optim/adamw.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/device_kernel_choice.h"
#include "core/error.h"
#include "optim/adamw_kernel.h"
#include "optim/fused_adamw.h"

namespace tessel::optim {

namespace {
// Elements per chunk of the ATen update: 1 MiB of fp32 on the CPU (a chunk
// stays in cache across the five passes); 64 MiB on a device, where each
// pass is a kernel launch (1 MiB chunks would make ~4,700 chunks of seven
// launches per step for a 1B model, ~0.15 s at a few microseconds each) and
// the chunk only bounds the one temporary.
constexpr int64_t kCpuChunkElements = int64_t{1} << 18;
constexpr int64_t kDeviceChunkElements = int64_t{1} << 24;

// The hand-written loop (optim/adamw_kernel.h) reads host memory: float32
// contiguous CPU tensors only. A device's take the ATen path below.
bool fused_fp32(const at::Tensor& p, const at::Tensor& g, const AdamWParamState& s) {
  for (const at::Tensor* t : {&p, &g, &s.exp_avg, &s.exp_avg_sq}) {
    if (t->scalar_type() != at::kFloat || !t->is_contiguous() || !t->device().is_cpu())
      return false;
  }
  return true;
}
}  // namespace


void validate(const AdamWOptions& o) {
  auto fail = [](const std::string& what) { throw UsageError("AdamW: " + what); };
  if (!(o.lr >= 0.0)) fail(fmt::format("lr must be >= 0, got {}", o.lr));
  if (!(o.eps >= 0.0)) fail(fmt::format("eps must be >= 0, got {}", o.eps));
  if (!(o.weight_decay >= 0.0)) fail(fmt::format("weight_decay must be >= 0, got {}", o.weight_decay));
  if (!(o.beta1 >= 0.0 && o.beta1 < 1.0)) fail(fmt::format("beta1 must be in [0, 1), got {}", o.beta1));
  if (!(o.beta2 >= 0.0 && o.beta2 < 1.0)) fail(fmt::format("beta2 must be in [0, 1), got {}", o.beta2));
}

AdamW::AdamW(std::vector<at::Tensor> params, AdamWOptions options)
    : params_(std::move(params)), state_(params_.size()), options_(options) {
  validate(options_);
  for (size_t i = 0; i < params_.size(); ++i) {
    TESSEL_CHECK(params_[i].defined(), "AdamW: parameter {} is undefined", i);
    TESSEL_CHECK(at::isFloatingType(params_[i].scalar_type()),
                 "AdamW: parameter {} has non-floating dtype {}", i,
                 std::string(c10::toString(params_[i].scalar_type())));
  }
}

void AdamW::step(double grad_scale) { step(grad_scale, [](size_t) {}); }

void AdamW::step(double grad_scale, const std::function<void(size_t)>& updated) {
  at::NoGradGuard no_grad;
  ++step_;
  const double bias_correction1 = 1.0 - std::pow(options_.beta1, static_cast<double>(step_));
  const double bias_correction2 = 1.0 - std::pow(options_.beta2, static_cast<double>(step_));
  const double step_size = options_.lr / bias_correction1;
  const double bias_correction2_sqrt = std::sqrt(bias_correction2);
  for (size_t i = 0; i < params_.size(); ++i) {
    update_one(i, grad_scale, bias_correction2_sqrt, step_size);
    updated(i);
  }
}

void AdamW::update_one(size_t i, double grad_scale, double bias_correction2_sqrt, double step_size) {
  at::Tensor& p = params_[i];
  const at::Tensor& grad = p.grad();
  if (!grad.defined()) return;
  TESSEL_CHECK(grad.sizes() == p.sizes(), "AdamW: gradient shape {} differs from parameter {}",
               fmt::join(grad.sizes(), "x"), fmt::join(p.sizes(), "x"));
  AdamWParamState& s = state_[i];
  if (!s.exp_avg.defined()) {
    s.exp_avg = at::zeros_like(p, at::MemoryFormat::Contiguous);
    s.exp_avg_sq = at::zeros_like(p, at::MemoryFormat::Contiguous);
  }
  if (p.numel() == 0) return;
  if (fused_fp32(p, grad, s)) {
    const AdamWCoefficients c{static_cast<float>(1.0 - options_.lr * options_.weight_decay),
                         static_cast<float>(1.0 - options_.beta1),
                         static_cast<float>(options_.beta2),
                         static_cast<float>(1.0 - options_.beta2),
                         static_cast<float>(bias_correction2_sqrt),
                         static_cast<float>(options_.eps),
                         static_cast<float>(-step_size),
                         static_cast<float>(grad_scale)};
    float* pp = p.data_ptr<float>();
    const float* gp = grad.data_ptr<float>();
    float* mp = s.exp_avg.data_ptr<float>();
    float* vp = s.exp_avg_sq.data_ptr<float>();
    at::parallel_for(0, p.numel(), kCpuChunkElements, [&](int64_t begin, int64_t end) {
      adamw_update_fp32(pp + begin, gp + begin, mp + begin, vp + begin, end - begin, c);
    });
    return;
  }
  if (fused_adamw_applies(p, grad, s) && device_kernels_chosen(fused_adamw_built())) {
    fused_adamw_update(p, grad, s, options_, step_, grad_scale);
    return;
  }
  // In chunks of flat views: the one temporary (denom) is chunk-sized, not
  // parameter-sized (an embedding shard can be hundreds of MB), and on the
  // CPU each chunk stays in cache across the five passes. Elementwise, so
  // the result does not depend on the chunking.
  const bool flat = p.is_contiguous() && grad.is_contiguous();
  const int64_t n = p.numel();
  const int64_t chunk = !flat ? n : p.device().is_cpu() ? kCpuChunkElements : kDeviceChunkElements;
  auto piece = [&](const at::Tensor& t, int64_t begin, int64_t len) {
    return flat ? t.view({-1}).narrow(0, begin, len) : t;
  };
  for (int64_t begin = 0; begin < n; begin += chunk) {
    const int64_t len = std::min(chunk, n - begin);
    at::Tensor pc = piece(p, begin, len), gc = piece(grad, begin, len);
    if (grad_scale != 1.0) gc = gc.mul(grad_scale);
    at::Tensor m = piece(s.exp_avg, begin, len), v = piece(s.exp_avg_sq, begin, len);
    pc.mul_(1.0 - options_.lr * options_.weight_decay);
    m.lerp_(gc, 1.0 - options_.beta1);
    v.mul_(options_.beta2).addcmul_(gc, gc, 1.0 - options_.beta2);
    at::Tensor denom = v.sqrt();
    denom.div_(bias_correction2_sqrt).add_(options_.eps);
    pc.addcdiv_(m, denom, -step_size);
  }
}

void AdamW::allocate_state() {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    AdamWParamState& s = state_[i];
    if (s.exp_avg.defined()) continue;
    s.exp_avg = at::zeros_like(params_[i], at::MemoryFormat::Contiguous);
    s.exp_avg_sq = at::zeros_like(params_[i], at::MemoryFormat::Contiguous);
  }
}

void AdamW::zero_grad() {
  for (at::Tensor& p : params_) {
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
  }
}

void AdamW::load_state(std::vector<AdamWParamState> state, int64_t step) {
  TESSEL_CHECK(state.size() == params_.size(),
               "AdamW state has {} entries but the optimizer has {} parameters", state.size(),
               params_.size());
  for (size_t i = 0; i < state.size(); ++i) {
    if (!state[i].exp_avg.defined()) continue;
    TESSEL_CHECK(state[i].exp_avg.sizes() == params_[i].sizes() &&
                     state[i].exp_avg_sq.sizes() == params_[i].sizes(),
                 "AdamW state of parameter {} has shape {} but the parameter has {}", i,
                 fmt::join(state[i].exp_avg.sizes(), "x"), fmt::join(params_[i].sizes(), "x"));
  }
  state_ = std::move(state);
  step_ = step;
}

int64_t AdamW::state_bytes() const {
  int64_t bytes = 0;
  for (const auto& s : state_) {
    if (s.exp_avg.defined()) bytes += s.exp_avg.nbytes() + s.exp_avg_sq.nbytes();
  }
  return bytes;
}

}  // namespace tessel::optim
