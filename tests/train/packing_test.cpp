// policy.sequence_packing through train(), world 1.
//
// What must be equal: packing changes the layout of each micro batch (rows
// of several documents instead of one padded example per row), never which
// examples form it. With the same sampler settings (seed, shuffle, global and
// micro batch sizes) a packed run and an unpacked run train step s on the
// same examples, in the same micro batches. The loss is the sum over the
// step's targets divided by their global count; pack() masks the first token
// of every document, so no target crosses a document boundary, and the
// targets are exactly the unpacked ones. So per step: valid_tokens and
// tokens (real, non-padding) are EQUAL, and loss and grad norm agree to
// float32 rounding (the attention of a packed row sums in another order),
// which over six AdamW steps stays within the tolerances of the accumulation
// test (trainer_test.cpp). Checked to fail when the trainer does not pass
// document_ids (documents then see their row neighbours): the step-1 loss
// moves by ~6e-5 relative, 6x the tolerance, and later steps by ~1e-3.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "fsdp/state_dict.h"
#include "train/train_fixture.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

using ::testing::HasSubstr;
using testing::TrainFixture;
using testing::full_params;
using testing::quiet;
using testing::world_mesh;




void expect_same_training(TrainResult& unpacked, TrainResult& packed, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(unpacked.steps.size(), packed.steps.size());
  for (size_t i = 0; i < unpacked.steps.size(); ++i) {
    const auto& u = unpacked.steps[i];
    const auto& p = packed.steps[i];
    EXPECT_EQ(u.valid_tokens, p.valid_tokens) << "step " << i + 1;
    EXPECT_EQ(u.tokens, p.tokens) << "step " << i + 1;
    EXPECT_NEAR(u.loss, p.loss, 1e-5 * std::abs(u.loss)) << "step " << i + 1;
    EXPECT_NEAR(u.grad_norm, p.grad_norm, 1e-4 * u.grad_norm) << "step " << i + 1;
  }
  const auto a = full_params(unpacked);
  const auto b = full_params(packed);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    // Both layouts compute the same sums in different orders (attention's
    // key tiles and reductions start at other positions in a packed row), and
    // AdamW turns rounding-level gradient differences of elements whose
    // gradient is near eps into update differences of ~1e-6 after 4 steps
    // (tiny-gemma3: 2.5e-6 with the tiled attention and RMSNorm kernels).
    EXPECT_TRUE(at::allclose(t, b.at(name), 1e-4, 5e-6))
        << name << " max diff " << (t - b.at(name)).abs().max().item<float>();
  }
}

class PackingTrainTest : public TrainFixture {};

// Global batch 4 = micro batch 4 (one micro batch per step). Packed with the
// recipe's defaults: the 4 examples of each micro batch in one row of at most
// 64 x 4 tokens, padded to a multiple of 64 (sequence_length_round).
TEST_F(PackingTrainTest, PackedRunMatchesUnpackedLossPerStep) {
  const auto mesh = world_mesh();
  TrainResult unpacked = train(make_config(), mesh, quiet());
  log::set_level(log::Level::Info);
  ::testing::internal::CaptureStderr();
  TrainResult packed = train(make_config({"policy.sequence_packing.enabled=true"}), mesh, quiet());
  const std::string log_text = ::testing::internal::GetCapturedStderr();
  // Said once, with the layout and the efficiency of the first step.
  EXPECT_THAT(log_text, HasSubstr("sequence packing on"));
  EXPECT_THAT(log_text, HasSubstr("rows of at most 256 tokens"));
  EXPECT_THAT(log_text, HasSubstr("packing efficiency"));
  size_t count = 0;
  for (size_t at = log_text.find("packing efficiency"); at != std::string::npos;
       at = log_text.find("packing efficiency", at + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u);
  expect_same_training(unpacked, packed, "one packed row per micro batch");
  for (const auto& s : packed.steps) EXPECT_TRUE(std::isfinite(s.loss));
  EXPECT_LT(packed.steps.back().loss, packed.steps.front().loss);
}

// Rows of at most 64 tokens (several rows per micro batch, each with its own
// padding), micro batches of 2 (gradient accumulation over 2), and no extra
// rounding, against one unpacked micro batch of 4: the same global batches.
TEST_F(PackingTrainTest, SeveralRowsAndAccumulationMatchUnpacked) {
  const auto mesh = world_mesh();
  TrainResult unpacked = train(make_config(), mesh, quiet());
  TrainResult packed = train(
      make_config(
          {"policy.sequence_packing.enabled=true", "policy.sequence_packing.train_mb_tokens=64",
           "policy.sequence_packing.sequence_length_round=1", "policy.train_micro_batch_size=2"}),
      mesh, quiet());
  expect_same_training(unpacked, packed, "rows of 64 tokens, accumulation 2");
}

// Gemma3 (sliding window 16 on its local layers, shorter than most examples)
// and validation, which packs its micro batches the same way.
TEST_F(PackingTrainTest, Gemma3WithValidationMatchesUnpacked) {
  const auto mesh = world_mesh();
  const std::vector<std::string> base = {
      "policy.model_name=tiny-gemma3", "sft.max_num_steps=4",
      "sft.val_at_end=true",           "sft.val_batches=2",
      "sft.val_global_batch_size=4",   "sft.val_micro_batch_size=2"};
  auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), base.begin(), base.end());
    return make_config(extra);
  };
  TrainResult unpacked = train(with({}), mesh, quiet());
  TrainResult packed = train(with({"policy.sequence_packing.enabled=true"}), mesh, quiet());
  expect_same_training(unpacked, packed, "tiny-gemma3");
  ASSERT_EQ(unpacked.validations.size(), 1u);
  ASSERT_EQ(packed.validations.size(), 1u);
  EXPECT_EQ(unpacked.validations[0].valid_tokens, packed.validations[0].valid_tokens);
  EXPECT_NEAR(unpacked.validations[0].loss, packed.validations[0].loss,
              1e-5 * std::abs(unpacked.validations[0].loss));
}

TEST_F(PackingTrainTest, BadPackingSettingsAreUsageErrors) {
  const auto mesh = world_mesh();
  auto message_of = [&](const std::vector<std::string>& extra) -> std::string {
    try {
      train(make_config(extra), mesh, quiet());
    } catch (const UsageError& e) {
      return e.what();
    }
    return "no UsageError";
  };
  // Rows shorter than the longest allowed example (max_input_seq_length 64).
  EXPECT_THAT(message_of({"policy.sequence_packing.enabled=true",
                          "policy.sequence_packing.train_mb_tokens=32"}),
              HasSubstr("train_mb_tokens=32"));
  EXPECT_THAT(message_of({"policy.sequence_packing.enabled=true",
                          "policy.sequence_packing.algorithm=concatenative"}),
              HasSubstr("concatenative"));
  EXPECT_THAT(message_of({"policy.sequence_packing.enabled=true",
                          "policy.sequence_packing.sequence_length_round=0"}),
              HasSubstr("sequence_length_round"));
  // A typo under the mapping fails like any unknown key.
  EXPECT_THAT(message_of({"+policy.sequence_packing.train_mb_tokenz=64"}),
              HasSubstr("train_mb_tokens"));
}

}  // namespace
}  // namespace tessel::train
