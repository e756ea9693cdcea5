// What a training algorithm brings to the shared loop (train/training_loop.h):
// its data cut into each step's micro batches, the objective the step
// minimises (train/step_objective.h), validation, and what else a checkpoint
// keeps. Everything else — the sharded model, AdamW, the learning-rate
// schedule, clipping, checkpoints and resuming, metrics, progress, the time
// limit — is the loop's, the same for every algorithm. SFT is one recipe
// (train/sft_recipe.h); DPO another (policy/dpo_recipe.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/sampler.h"
#include "dist/device_mesh.h"
#include "train/checkpoint.h"
#include "train/model_setup.h"
#include "train/step_objective.h"
#include "train/train_step.h"

namespace tessel::train {

class Recipe {
 public:
  virtual ~Recipe() = default;
  // The algorithm's config section ("sft", "dpo"), for messages.
  virtual std::string name() const = 0;
  // Once the model is set up with its initial weights, before any step or
  // resume: loads the data and keeps what the recipe needs of the model (DPO:
  // the reference policy). Collective over the mesh.
  virtual void setup(ShardedModel& model, const dist::DeviceMesh& mesh) = 0;
  // Lines for the log (rank 0 prints them): the tokenizer, the data, how
  // each step's batch is made.
  virtual std::vector<std::string> describe(const dist::DeviceMesh& mesh) const = 0;
  virtual int64_t steps_per_epoch() const = 0;
  // This rank's micro batches of the next step, ready for the objective
  // (DPO: the reference log-probs filled in); advances the data position.
  // `step` is the 0-based step about to run. Collective over the mesh.
  virtual std::vector<MicroBatch> next_step(ShardedModel& model, const dist::DeviceMesh& mesh, int64_t step) = 0;
  virtual StepObjective& objective() = 0;
  // Whether the config asks for validation at all, and one validation pass
  // (collective over the mesh).
  virtual bool validates() const = 0;
  virtual EvalResult validate(ShardedModel& model, const dist::DeviceMesh& mesh) = 0;
  // The data position a checkpoint records, and restoring it.
  virtual data::SamplerState data_state() const = 0;
  virtual void load_data_state(const data::SamplerState& state) = 0;
  // Tensors laid out like the model's shards that a checkpoint keeps too, by
  // kind (DPO: "reference", the reference policy); loading fills them.
  virtual ShardSets* checkpoint_shards() { return nullptr; }
  // The objective's metrics beside the loss that progress lines show.
  virtual std::vector<std::string> shown_metrics() const { return {}; }
  // Metrics of the step next_step() just prepared, the same on every rank
  // (GRPO: rewards, advantages, generation throughput, time per phase): the
  // loop records them after the objective's.
  virtual std::vector<std::pair<std::string, double>> step_metrics() const { return {}; }
};

}  // namespace tessel::train
