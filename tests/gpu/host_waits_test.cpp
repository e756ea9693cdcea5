// A training step on a GPU makes the host wait for the device as often with
// four micro batches as with one: nothing in a micro batch (moving its
// tensors, the forward, the loss and its metric, the backward) reads the
// device, since each such read stalls the GPU until the host has queued work
// again. The step's own reads (its metrics once, the gradient norm) stay.
// Counted with CUDA's sync debug mode (device::Backend::host_waits_during).
// Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "config/parallelism_config.h"
#include "device/backend.h"
#include "gpu/gpu_world.h"
#include "loss/cross_entropy.h"
#include "optim/adamw.h"
#include "train/model_setup.h"
#include "train/next_token_objective.h"
#include "train/train_fixture.h"
#include "train/train_options.h"
#include "train/train_step.h"

namespace tessel::gpu_testing {
namespace {

using train::MicroBatch;

class HostWaits : public train::testing::TrainFixture {
 protected:
  void SetUp() override {
    TrainFixture::SetUp();
    TESSEL_REQUIRE_GPU();
    if (dist::world()->size() != 1) GTEST_SKIP() << "runs at one process";
  }

  // `count` micro batches of 2 rows x 64 tokens; `packed`: each row two
  // documents (28 and 36 tokens), ids and positions on the host as the
  // data loader makes them.
  static std::vector<MicroBatch> micro_batches(int64_t vocab, int count, bool packed, int seed) {
    std::vector<MicroBatch> out;
    for (int m = 0; m < count; ++m) {
      at::manual_seed(100 * seed + m);
      MicroBatch mb;
      mb.input_ids = at::randint(vocab, {2, 64}, at::kLong);
      mb.labels = loss::next_token_labels(mb.input_ids, at::ones_like(mb.input_ids));
      mb.num_tokens = 128;
      if (packed) {
        const at::Tensor first = at::zeros({2, 28}, at::kLong), second = at::ones({2, 36}, at::kLong);
        mb.document_ids = at::cat({first, second}, 1);
        mb.position_ids = at::cat({at::arange(28, at::kLong).expand({2, 28}), at::arange(36, at::kLong).expand({2, 36})},
                                  1)
                              .contiguous();
        mb.labels.select(1, 27).fill_(loss::kIgnoreIndex);
      }
      out.push_back(std::move(mb));
    }
    return out;
  }

  // The host waits of a step of `count` micro batches, after a first step
  // (AdamW's state, the allocator's first blocks).
  std::vector<std::string> waits_of_a_step(const std::string& preset, int count, bool packed, bool fused_head) {
    const config::Config cfg = make_config({"policy.model_name=" + preset});
    const dist::DeviceMesh mesh = single_rank_mesh(true);
    train::ShardedModel model =
        train::setup_model(train::train_options_from(cfg), mesh, config::parallelism_from(cfg));
    optim::AdamW optimizer(model.params, optim::AdamWOptions{});
    train::NextTokenObjective objective;
    objective.set_fused_head(fused_head, model);
    const int64_t vocab = model.model->config().vocab_size;
    train::train_step(model, optimizer, mesh, micro_batches(vocab, count, packed, 1), objective, 1e-3, 1.0);
    const std::vector<MicroBatch> batches = micro_batches(vocab, count, packed, 2);
    return device::cuda_backend()->host_waits_during(
        [&] { train::train_step(model, optimizer, mesh, batches, objective, 1e-3, 1.0); });
  }
};

std::string stacks_after(const std::vector<std::string>& stacks, size_t first) {
  std::string out;
  for (size_t i = first; i < stacks.size(); ++i) out += "--- wait " + std::to_string(i + 1) + ":\n" + stacks[i];
  return out;
}

TEST_F(HostWaits, AStepWaitsAsOftenWithFourMicroBatchesAsWithOne) {
  struct Case {
    const char* name;
    bool packed;
    bool fused_head;
  };
  for (const Case& c : {Case{"rows", false, false}, Case{"packed documents", true, false},
                        Case{"fused head loss", false, true}}) {
    SCOPED_TRACE(c.name);
    const std::vector<std::string> one = waits_of_a_step("tiny-llama", 1, c.packed, c.fused_head);
    const std::vector<std::string> four = waits_of_a_step("tiny-llama", 4, c.packed, c.fused_head);
    std::printf("host waits per step (%s): %zu with one micro batch, %zu with four\n", c.name, one.size(),
                four.size());
    EXPECT_EQ(four.size(), one.size()) << "the waits of four micro batches beyond one's:\n"
                                       << stacks_after(four, one.size()) << "\nall of one micro batch's:\n"
                                       << stacks_after(one, 0);
  }
}

}  // namespace
}  // namespace tessel::gpu_testing
