// tessel's CUDA kernels (nn/device_kernels.h) on a GPU: RMSNorm (both
// weight styles), the rotary embedding and the SiLU product, forward and
// backward, in float32, bfloat16 and float16 storage, odd sizes, each
// against the formula in float64 on the CPU (differentiated by autograd) on
// the same rounded inputs; the modules routing to them when switched on;
// and training with them on following training with ATen's compositions.
// Skipped without a CUDA device, or where the CUDA build had no nvcc.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "gpu/bf16_loss_curve.h"
#include "gpu/gpu_world.h"
#include "gpu/kernel_choice.h"
#include "nn/device_kernel_launch.h"
#include "nn/device_kernels.h"
#include "nn/rms_norm.h"
#include "nn/rotary.h"
#include "train/train_fixture.h"
#include "train/trainer.h"

namespace tessel::gpu_testing {
namespace {

using train::testing::quiet;

struct Storage {
  at::ScalarType dtype;
  double tolerance;  // of the largest magnitude: a few roundings of the storage type
};

const std::vector<Storage>& storages() {
  static const std::vector<Storage> all = {
      {at::kFloat, 2e-5}, {at::kBFloat16, 2e-2}, {at::kHalf, 3e-3}};
  return all;
}

// An input in storage `dtype` on the GPU, and the same values in float64
// on the CPU (so the reference sees the rounded input, not the original).
struct Input {
  at::Tensor gpu, ref;
};

Input input(const at::Tensor& values, at::ScalarType dtype, bool grad = true) {
  const at::Tensor stored = values.to(dtype);
  Input in{stored.to(gpu_world()->device).detach(), stored.to(at::kDouble).detach()};
  if (grad) {
    in.gpu.requires_grad_();
    in.ref.requires_grad_();
  }
  return in;
}

void expect_close(const at::Tensor& got, const at::Tensor& want, double tolerance, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  const double err = (got.to(at::kCPU, at::kDouble) - want).abs().max().item<double>();
  const double size = want.abs().max().item<double>();
  EXPECT_LE(err, tolerance * std::max(1.0, size)) << what << " (largest |want| " << size << ")";
}

std::string dtype_name(at::ScalarType t) { return c10::toString(t); }

class DeviceKernels : public ::testing::Test {
 protected:
  void SetUp() override {
    TESSEL_REQUIRE_GPU();
    TESSEL_REQUIRE_KERNELS();
    if (dist::world()->size() != 1) GTEST_SKIP() << "runs at one process";
  }
};

TEST_F(DeviceKernels, RmsNormMatchesTheFormulaForwardAndBackward) {
  at::manual_seed(11);
  for (const Storage& s : storages()) {
    for (const bool offset : {false, true}) {
      for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{37, 1000}, {3, 5, 33}, {2, 4099}, {1, 10240}}) {
        const std::string what = dtype_name(s.dtype) + (offset ? " gemma " : " llama ") + std::to_string(shape.back());
        const int64_t dim = shape.back();
        Input x = input(at::randn(shape) * 3, s.dtype), w = input(at::rand({dim}) + 0.5, s.dtype);
        const at::Tensor dy = at::randn(shape);
        const double eps = 1e-6;
        const at::Tensor y = nn::rms_norm_device(x.gpu, w.gpu, eps, offset);
        EXPECT_EQ(y.scalar_type(), s.dtype);
        y.backward(dy.to(gpu_world()->device, s.dtype));
        const at::Tensor normed = x.ref * at::rsqrt(x.ref.pow(2).mean({-1}, true) + eps);
        const at::Tensor ref = offset ? normed * (w.ref + 1) : normed * w.ref;
        ref.backward(dy.to(s.dtype).to(at::kDouble));
        expect_close(y, ref.detach(), s.tolerance, what + " y");
        expect_close(x.gpu.grad(), x.ref.grad(), s.tolerance, what + " dx");
        // dw sums over every row: its error grows with the rows, its size too.
        expect_close(w.gpu.grad(), w.ref.grad(), s.tolerance, what + " dw");
      }
    }
  }
}

TEST_F(DeviceKernels, RotaryMatchesTheFormulaForwardAndBackward) {
  at::manual_seed(12);
  const int64_t B = 2, H = 3, T = 37, D = 66;
  const nn::RotaryEmbedding rope(D, 10000.0);
  for (const Storage& s : storages()) {
    for (const bool per_batch : {true, false}) {
      const std::string what = dtype_name(s.dtype) + (per_batch ? " cos [B,T,D]" : " cos [T,D]");
      // Heads as the projections make them: [B, T, H, D] seen as [B, H, T, D].
      Input x = input(at::randn({B, T, H, D}), s.dtype, /*grad=*/false);
      x.gpu = x.gpu.transpose(1, 2).requires_grad_();
      x.ref = x.ref.transpose(1, 2).requires_grad_();
      const at::Tensor positions = per_batch ? at::stack({at::arange(T, at::kLong), at::arange(5, 5 + T, at::kLong)})
                                             : at::arange(3, 3 + T, at::kLong);
      auto [cos, sin] = rope.cos_sin(positions, s.dtype);
      const at::Tensor dy = at::randn({B, H, T, D});
      const at::Tensor y = nn::rotary_device(x.gpu, cos.to(gpu_world()->device), sin.to(gpu_world()->device));
      y.backward(dy.to(gpu_world()->device, s.dtype));
      const at::Tensor c = per_batch ? cos.to(at::kDouble).unsqueeze(1) : cos.to(at::kDouble);
      const at::Tensor sn = per_batch ? sin.to(at::kDouble).unsqueeze(1) : sin.to(at::kDouble);
      const at::Tensor ref = x.ref * c + nn::rotate_half(x.ref) * sn;
      ref.backward(dy.to(s.dtype).to(at::kDouble));
      expect_close(y, ref.detach(), s.tolerance, what + " y");
      expect_close(x.gpu.grad(), x.ref.grad(), s.tolerance, what + " dx");
    }
  }
}

TEST_F(DeviceKernels, SwiGluMatchesTheFormulaForwardAndBackward) {
  at::manual_seed(13);
  for (const Storage& s : storages()) {
    for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{37, 1001}, {3, 7}}) {
      const std::string what = dtype_name(s.dtype) + " " + std::to_string(shape.back());
      Input g = input(at::randn(shape) * 4, s.dtype), u = input(at::randn(shape), s.dtype);
      const at::Tensor dh = at::randn(shape);
      const at::Tensor h = nn::swiglu_device(g.gpu, u.gpu);
      h.backward(dh.to(gpu_world()->device, s.dtype));
      const at::Tensor ref = g.ref * at::sigmoid(g.ref) * u.ref;
      ref.backward(dh.to(s.dtype).to(at::kDouble));
      expect_close(h, ref.detach(), s.tolerance, what + " h");
      expect_close(g.gpu.grad(), g.ref.grad(), s.tolerance, what + " dg");
      expect_close(u.gpu.grad(), u.ref.grad(), s.tolerance, what + " du");
    }
  }
}

std::string node_name(const at::Tensor& t) { return t.grad_fn() ? t.grad_fn()->name() : "(leaf)"; }

TEST_F(DeviceKernels, TheModulesTakeThemWhenSwitchedOn) {
  const c10::Device gpu = gpu_world()->device;
  auto norm = std::make_shared<nn::RMSNorm>(64, 1e-6, nn::RMSNormStyle::Llama,
                                            at::TensorOptions().device(gpu).dtype(at::kBFloat16));
  {
    at::NoGradGuard no_grad;
    norm->weight().fill_(1.0);
  }
  const at::Tensor x = at::randn({4, 64}, at::TensorOptions().device(gpu).dtype(at::kBFloat16)).requires_grad_();
  // options() carries no requires_grad: the heads need one of their own, or
  // no autograd node is made at all (custom functions record one only when an
  // input needs a gradient) and both names read "(leaf)".
  const at::Tensor heads = at::randn({1, 2, 5, 64}, x.options()).requires_grad_();
  const at::Tensor cs = at::randn({5, 64}, x.options());
  const std::string composed_norm = node_name(norm->call(x)), composed_rotary = node_name(nn::apply_rotary(heads, cs, cs));
  const KernelChoice fused("fused");
  EXPECT_NE(node_name(norm->call(x)).find("RmsNormDeviceFunction"), std::string::npos)
      << node_name(norm->call(x)) << " (without: " << composed_norm << ")";
  EXPECT_NE(node_name(nn::apply_rotary(heads, cs, cs)).find("RotaryDeviceFunction"), std::string::npos)
      << node_name(nn::apply_rotary(heads, cs, cs)) << " (without: " << composed_rotary << ")";
}

class DeviceKernelTraining : public train::testing::TrainFixture {
 protected:
  void SetUp() override {
    TrainFixture::SetUp();
    TESSEL_REQUIRE_GPU();
    TESSEL_REQUIRE_KERNELS();
    if (dist::world()->size() != 1) GTEST_SKIP() << "runs at one process";
  }
};

// Ten steps of three tiny presets on the GPU with the kernels and with ATen's
// compositions: fp32 losses within 1e-4 relative, gradient norms 1e-3 (as
// CUDA against the CPU: cuda_training_test.cpp); and
// bf16 compute (fp32 master weights) with the kernels follows the fp32
// composition's loss curve over 50 steps as the bf16 path itself must
// (bf16_loss_curve.h).
TEST_F(DeviceKernelTraining, TrainingWithTheKernelsFollowsTheCompositions) {
  const dist::DeviceMesh gpu = single_rank_mesh(true);
  auto train_fused = [&](const config::Config& cfg) {
    const KernelChoice fused("fused");
    return train::train(cfg, gpu, quiet());
  };
  // Llama's norm, Gemma's offset norm (and GELU: no SiLU product), Qwen3's
  // norms of the heads and its experts.
  for (const std::string preset : {"tiny-llama", "tiny-gemma3", "tiny-qwen3-moe"}) {
    SCOPED_TRACE(preset);
    const config::Config cfg = make_config({"policy.model_name=" + preset, "sft.max_num_steps=10"});
    const train::TrainResult want = train::train(cfg, gpu, quiet());
    const train::TrainResult got = train_fused(cfg);
    ASSERT_EQ(got.steps.size(), want.steps.size());
    for (size_t s = 0; s < want.steps.size(); ++s) {
      EXPECT_NEAR(got.steps[s].loss, want.steps[s].loss, 1e-4 * std::abs(want.steps[s].loss)) << "step " << s + 1;
      EXPECT_NEAR(got.steps[s].grad_norm, want.steps[s].grad_norm, 1e-3 * want.steps[s].grad_norm)
          << "step " << s + 1;
    }
  }
  const std::vector<std::string> run = {"policy.model_name=tiny-llama", "sft.max_num_steps=50"};
  std::vector<std::string> bf16 = run;
  bf16.push_back("policy.precision=bfloat16");
  const train::TrainResult fp32 = train::train(make_config(run), gpu, quiet());
  const train::TrainResult low = train_fused(make_config(bf16));
  expect_bf16_follows_fp32(low, fp32);
}

}  // namespace
}  // namespace tessel::gpu_testing
