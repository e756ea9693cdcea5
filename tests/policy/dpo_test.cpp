// DPO through the library on one process (what `tessel dpo` runs): on the
// demo preference pairs the preference accuracy and the reward margin rise
// from 0 (the policy starts as its own reference) on the training and the
// validation pairs; a run resumed from a checkpoint continues exactly as the
// uninterrupted one (the checkpoint kept the reference: rebuilt from the
// resumed weights it would give other rewards); bad preference data and
// config keys fail with messages naming the line or the key; every dpo.* key
// is read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "config/loader.h"
#include "core/error.h"
#include "policy/dpo_recipe.h"
#include "policy/logprob_goldens.h"
#include "policy/loss_options.h"
#include "support/source_tree.h"
#include "support/temp_dir.h"
#include "train/step_objective.h"

namespace tessel::policy {
namespace {

using ::testing::HasSubstr;

train::RunOptions quiet() {
  train::RunOptions r;
  r.quiet = true;
  r.write_logs = false;
  return r;
}

config::Config dpo_config(const std::vector<std::string>& extra) {
  std::vector<std::string> o = {"policy.model_name=tiny-llama", "dpo.max_num_steps=24", "dpo.max_num_epochs=100",
                                "dpo.val_period=12", "dpo.val_batches=2", "dpo.val_global_batch_size=16",
                                "dpo.val_micro_batch_size=8", "dpo.val_at_start=true",
                                "dpo.reference_policy_kl_penalty=0.1", "policy.train_global_batch_size=16",
                                "policy.train_micro_batch_size=8", "policy.max_total_sequence_length=64",
                                "policy.optimizer.kwargs.lr=0.001", "policy.scheduler=null",
                                "checkpointing.enabled=false"};
  o.insert(o.end(), extra.begin(), extra.end());
  return config::load_config(test_support::source_tree() / "examples" / "configs" / "dpo.yaml", o);
}

double mean_of(const std::vector<train::StepMetrics>& steps, size_t from, size_t to, const char* name) {
  double sum = 0.0;
  for (size_t i = from; i < to; ++i) sum += train::metric(steps[i].objective_metrics, name);
  return sum / static_cast<double>(to - from);
}

TEST(Dpo, AccuracyAndRewardMarginRiseOnTheDemoPairs) {
  const train::TrainResult r = train_dpo(dpo_config({}), testing::one_process_mesh(), quiet());
  ASSERT_EQ(r.steps.size(), 24u);
  // The policy starts as its reference: every reward is exactly 0.
  EXPECT_EQ(train::metric(r.steps[0].objective_metrics, "accuracy"), 0.0);
  EXPECT_EQ(train::metric(r.steps[0].objective_metrics, "reward_margin"), 0.0);
  EXPECT_NEAR(r.steps[0].loss, std::log(2.0), 1e-6);
  EXPECT_GT(mean_of(r.steps, 16, 24, "accuracy"), 0.7);
  EXPECT_GT(mean_of(r.steps, 16, 24, "reward_margin"), mean_of(r.steps, 1, 8, "reward_margin") + 1.0);
  EXPECT_LT(r.steps.back().loss, r.steps.front().loss);
  ASSERT_EQ(r.validations.size(), 3u);  // steps 0, 12, 24
  EXPECT_EQ(train::metric(r.validations.front().objective_metrics, "accuracy"), 0.0);
  EXPECT_GT(train::metric(r.validations.back().objective_metrics, "accuracy"), 0.55);
  EXPECT_GT(train::metric(r.validations.back().objective_metrics, "reward_margin"), 0.5);
}

TEST(Dpo, AResumedRunKeepsItsReference) {
  test_support::TempDir dir;
  const std::vector<std::string> common = {"dpo.max_num_steps=8", "dpo.val_period=0", "dpo.val_at_start=false",
                                           "checkpointing.enabled=true", "checkpointing.save_period=4"};
  auto whole = common;
  whole.push_back("checkpointing.checkpoint_dir=" + (dir.path() / "whole").string());
  const train::TrainResult uninterrupted = train_dpo(dpo_config(whole), testing::one_process_mesh(), quiet());
  auto half = common;
  half.push_back("checkpointing.checkpoint_dir=" + (dir.path() / "resumed").string());
  half.push_back("dpo.max_num_steps=4");
  train_dpo(dpo_config(half), testing::one_process_mesh(), quiet());
  half.back() = "dpo.max_num_steps=8";
  const train::TrainResult resumed = train_dpo(dpo_config(half), testing::one_process_mesh(), quiet());
  ASSERT_EQ(resumed.steps.size(), 4u);
  for (size_t s = 0; s < 4; ++s) {
    const auto& want = uninterrupted.steps[s + 4];
    EXPECT_EQ(resumed.steps[s].step, want.step);
    EXPECT_NEAR(resumed.steps[s].loss, want.loss, 1e-6 * std::abs(want.loss)) << "step " << want.step;
    EXPECT_NEAR(train::metric(resumed.steps[s].objective_metrics, "reward_margin"),
                train::metric(want.objective_metrics, "reward_margin"), 1e-5)
        << "step " << want.step;
  }
}

// Runs a DPO config on `lines` as the training pairs; the error it throws.
std::string error_of(const std::string& lines, const std::vector<std::string>& extra = {}) {
  test_support::TempDir dir;
  const auto path = dir.write("pairs.jsonl", lines);
  auto o = extra;
  o.push_back("data.train.dataset_name=" + path.string());
  o.push_back("data.validation=null");
  try {
    train_dpo(dpo_config(o), testing::one_process_mesh(), quiet());
  } catch (const UsageError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Dpo, BadPreferenceDataNamesTheLine) {
  const std::string good = "{\"prompt\": \"1+1=\", \"chosen\": \"2\", \"rejected\": \"3\"}\n";
  std::string e = error_of(good + "{\"prompt\": \"2+2=\", \"chosen\": \"4\"}\n");
  EXPECT_THAT(e, HasSubstr("pairs.jsonl:2"));
  EXPECT_THAT(e, HasSubstr("'rejected' is missing"));
  e = error_of(good + "{\"prompt\": \"2+2=\", \"chosen\": 4, \"rejected\": \"5\"}\n");
  EXPECT_THAT(e, HasSubstr("pairs.jsonl:2"));
  EXPECT_THAT(e, HasSubstr("'chosen' is number"));
  // 30 bytes of prompt, bos and eos: 36 tokens over a limit of 32.
  e = error_of(good + "{\"prompt\": \"" + std::string(30, 'a') + "\", \"chosen\": \"bbb\", \"rejected\": \"c\"}\n",
               {"data.max_input_seq_length=32"});
  EXPECT_THAT(e, HasSubstr("pairs.jsonl:2"));
  EXPECT_THAT(e, HasSubstr("the chosen row is 35 tokens"));
  EXPECT_THAT(e, HasSubstr("data.max_input_seq_length=32"));
  e = error_of("");
  EXPECT_THAT(e, HasSubstr("empty"));
}

TEST(Dpo, UnknownKeysAreRefusedNamingThem) {
  for (const auto& [override_, named] : std::vector<std::pair<std::string, std::string>>{
           {"+dpo.reference_policy_kl_penalti=0.1", "dpo.reference_policy_kl_penalti"},
           {"+dpo.preference_loss=ipo", "dpo.preference_loss"},
           {"+loss_fn={ratio_clip_min: 0.2}", "loss_fn"},
           {"dpo.reference_policy_kl_penalty=0", "reference_policy_kl_penalty"},
           {"dpo.sft_loss_weight=-1", "sft_loss_weight"}}) {
    SCOPED_TRACE(override_);
    try {
      const config::Config c = dpo_config({override_});
      (void)train::train_options_from(c, dpo_section());
      (void)dpo_options_from(c);
      ADD_FAILURE() << "accepted";
    } catch (const UsageError& e) {
      EXPECT_THAT(e.what(), HasSubstr(named));
    }
  }
}

// Every key of the dpo section is read: the loop's (as sft's, into
// TrainOptions) and the loss's (into DpoOptions).
TEST(Dpo, EveryDpoKeyIsRead) {
  struct Parsed {
    train::TrainOptions train;
    DpoOptions dpo;
  };
  const auto parse = [](const std::vector<std::string>& o) {
    const config::Config c = dpo_config(o);
    return Parsed{train::train_options_from(c, dpo_section()), dpo_options_from(c)};
  };
  using Changed = std::function<bool(const Parsed&, const Parsed&)>;
#define T_FIELD(f) [](const Parsed& a, const Parsed& b) { return a.train.f != b.train.f; }
#define D_FIELD(f) [](const Parsed& a, const Parsed& b) { return a.dpo.f != b.dpo.f; }
  const std::map<std::string, std::pair<std::string, Changed>> probes = {
      {"max_num_epochs", {"dpo.max_num_epochs=3", T_FIELD(max_num_epochs)}},
      {"max_num_steps", {"dpo.max_num_steps=7", T_FIELD(max_num_steps)}},
      {"val_period", {"dpo.val_period=3", T_FIELD(val_period)}},
      {"val_batches", {"dpo.val_batches=5", T_FIELD(val_batches)}},
      {"val_global_batch_size", {"dpo.val_global_batch_size=32", T_FIELD(val_global_batch_size)}},
      {"val_micro_batch_size", {"dpo.val_micro_batch_size=2", T_FIELD(val_micro_batch_size)}},
      {"val_at_start", {"dpo.val_at_start=false", T_FIELD(val_at_start)}},
      {"val_at_end", {"dpo.val_at_end=true", T_FIELD(val_at_end)}},
      {"seed", {"dpo.seed=7", T_FIELD(seed)}},
      {"reference_policy_kl_penalty", {"dpo.reference_policy_kl_penalty=0.3", D_FIELD(reference_policy_kl_penalty)}},
      {"preference_loss_weight", {"dpo.preference_loss_weight=0.5", D_FIELD(preference_loss_weight)}},
      {"sft_loss_weight", {"dpo.sft_loss_weight=0.5", D_FIELD(sft_loss_weight)}},
      {"preference_average_log_probs",
       {"dpo.preference_average_log_probs=true", D_FIELD(preference_average_log_probs)}},
      {"sft_average_log_probs", {"dpo.sft_average_log_probs=true", D_FIELD(sft_average_log_probs)}},
  };
  const Parsed base = parse({});
  for (const auto& section : train::checked_config_sections(dpo_section())) {
    if (section.path != "dpo") continue;
    for (const auto& key : section.keys) {
      SCOPED_TRACE(key);
      const auto it = probes.find(key);
      ASSERT_NE(it, probes.end()) << "dpo." << key << " is accepted but has no probe";
      EXPECT_TRUE(it->second.second(base, parse({it->second.first}))) << "setting it changed nothing";
    }
    EXPECT_EQ(section.keys.size(), probes.size());
  }
  // The recipe's interpolation: sft_average_log_probs follows preference_average_log_probs.
  EXPECT_TRUE(parse({"dpo.preference_average_log_probs=true"}).dpo.sft_average_log_probs);
}

}  // namespace
}  // namespace tessel::policy
