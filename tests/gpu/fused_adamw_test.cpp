// AdamW on a GPU with libtorch's fused kernel (optim/fused_adamw.h,
// TESSEL_DEVICE_KERNELS=fused) against AdamW's ATen passes on the CPU:
// five steps of parameters of odd sizes, weight decay, a clipping scale on
// some steps, a parameter without a gradient on one; parameters and both
// moments within 1e-6 relative, and the gradients left as they were.
// Skipped without a CUDA device or where this build has no fused AdamW.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstdlib>
#include <vector>

#include "core/device_kernel_choice.h"
#include "gpu/gpu_world.h"
#include "optim/adamw.h"
#include "optim/fused_adamw.h"

namespace tessel::gpu_testing {
namespace {

TEST(FusedAdamW, MatchesTheAtenPassesOnTheCpu) {
  TESSEL_REQUIRE_GPU();
  if (!optim::fused_adamw_built()) GTEST_SKIP() << "this build has no fused AdamW";
  if (dist::world()->size() != 1) GTEST_SKIP() << "runs at one process";
  const c10::Device gpu = gpu_world()->device;
  at::manual_seed(31);
  const std::vector<std::vector<int64_t>> shapes = {{37, 101}, {7}, {3, 5, 9}, {1}};
  std::vector<at::Tensor> on_cpu, on_gpu;
  for (const auto& shape : shapes) {
    const at::Tensor p = at::randn(shape);
    on_cpu.push_back(p.clone().requires_grad_());
    on_gpu.push_back(p.to(gpu).requires_grad_());
  }
  optim::AdamWOptions o;
  o.lr = 1e-2;
  o.weight_decay = 0.1;
  optim::AdamW cpu_opt(on_cpu, o), gpu_opt(on_gpu, o);
  cpu_opt.allocate_state();  // as the trainer does before the first step
  gpu_opt.allocate_state();
  ::setenv("TESSEL_DEVICE_KERNELS", "fused", 1);
  for (int step = 1; step <= 5; ++step) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (step == 3 && i == 1) {  // no gradient: skipped, as in PyTorch
        on_cpu[i].mutable_grad() = at::Tensor();
        on_gpu[i].mutable_grad() = at::Tensor();
        continue;
      }
      const at::Tensor g = at::randn(shapes[i]);
      on_cpu[i].mutable_grad() = g.clone();
      on_gpu[i].mutable_grad() = g.to(gpu);
    }
    // The fused kernel, not the ATen passes, is what the GPU side runs (else
    // this test would compare the passes with themselves).
    EXPECT_TRUE(device_kernels_chosen(optim::fused_adamw_built()));
    for (size_t i = 0; i < shapes.size(); ++i) {
      if (on_gpu[i].grad().defined()) {
        EXPECT_TRUE(optim::fused_adamw_applies(on_gpu[i], on_gpu[i].grad(), gpu_opt.state()[i])) << i;
      }
    }
    const double scale = step % 2 == 0 ? 0.37 : 1.0;
    cpu_opt.step(scale);
    gpu_opt.step(scale);
    for (size_t i = 0; i < shapes.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(step) + " parameter " + std::to_string(i));
      auto near = [](const at::Tensor& got, const at::Tensor& want) {
        const double err = (got.to(at::kCPU) - want).abs().max().item<double>();
        return err <= 1e-6 * std::max(1.0, want.abs().max().item<double>());
      };
      EXPECT_TRUE(near(on_gpu[i].detach(), on_cpu[i].detach())) << "parameter";
      if (on_cpu[i].grad().defined()) {
        EXPECT_TRUE(near(on_gpu[i].grad(), on_cpu[i].grad())) << "gradient left alone";
      }
      EXPECT_TRUE(near(gpu_opt.state()[i].exp_avg, cpu_opt.state()[i].exp_avg)) << "first moment";
      EXPECT_TRUE(near(gpu_opt.state()[i].exp_avg_sq, cpu_opt.state()[i].exp_avg_sq)) << "second moment";
    }
  }
  ::unsetenv("TESSEL_DEVICE_KERNELS");
}

}  // namespace
}  // namespace tessel::gpu_testing
