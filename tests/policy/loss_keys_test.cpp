// Every key of the policy losses' config sections is read (as
// tests/train/config_keys_test.cpp holds SFT's keys to it): a probe per key
// sets it to a value other than the base's and shows that the parsed options
// change, or that the value is refused with a UsageError naming the key. A
// key added to a list without a probe fails here, and so does an unknown key
// (named in the error with the closest known one).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/loader.h"
#include "config/overrides.h"
#include "core/error.h"
#include "policy/loss_options.h"

namespace tessel::policy {
namespace {

using ::testing::HasSubstr;

// NeMo RL's GRPO recipe's loss_fn section (grpo_math_1B.yaml), plus the key
// its later versions added.
constexpr const char* kGrpoLoss = R"(
loss_fn:
  reference_policy_kl_penalty: 0.01
  ratio_clip_min: 0.2
  ratio_clip_max: 0.2
  ratio_clip_c: null
  use_on_policy_kl_approximation: false
  use_importance_sampling_correction: false
  truncated_importance_sampling_ratio: null
  sequence_level_importance_ratios: false
  token_level_loss: true
)";

ClippedPGOptions parse(const std::vector<std::string>& overrides) {
  config::Config c = config::parse_yaml(kGrpoLoss, "grpo loss");
  config::apply_overrides(c, overrides);
  return clipped_pg_options_from(c);
}

using Changed = std::function<bool(const ClippedPGOptions&, const ClippedPGOptions&)>;
struct Probe {
  std::vector<std::string> setup;
  std::string change;
  Changed changed;  // empty: the value must be refused
};

#define PG_FIELD(f) [](const ClippedPGOptions& a, const ClippedPGOptions& b) { return a.f != b.f; }

const std::map<std::string, Probe>& probes() {
  const std::vector<std::string> is_on = {"loss_fn.use_importance_sampling_correction=true"};
  static const std::map<std::string, Probe> table = {
      {"reference_policy_kl_penalty", {{}, "loss_fn.reference_policy_kl_penalty=0.2", PG_FIELD(reference_policy_kl_penalty)}},
      {"ratio_clip_min", {{}, "loss_fn.ratio_clip_min=0.1", PG_FIELD(ratio_clip_min)}},
      {"ratio_clip_max", {{}, "loss_fn.ratio_clip_max=0.28", PG_FIELD(ratio_clip_max)}},
      {"ratio_clip_c", {{}, "loss_fn.ratio_clip_c=3", PG_FIELD(ratio_clip_c)}},
      {"use_on_policy_kl_approximation",
       {{}, "loss_fn.use_on_policy_kl_approximation=true", PG_FIELD(use_on_policy_kl_approximation)}},
      {"use_importance_sampling_correction",
       {{}, "loss_fn.use_importance_sampling_correction=true", PG_FIELD(use_importance_sampling_correction)}},
      {"truncated_importance_sampling_ratio",
       {is_on, "loss_fn.truncated_importance_sampling_ratio=2.0", PG_FIELD(truncated_importance_sampling_ratio)}},
      {"sequence_level_importance_ratios",
       {{"loss_fn.token_level_loss=false"}, "loss_fn.sequence_level_importance_ratios=true",
        PG_FIELD(sequence_level_importance_ratios)}},
      {"token_level_loss", {{}, "loss_fn.token_level_loss=false", PG_FIELD(token_level_loss)}},
  };
  return table;
}

TEST(LossKeys, EveryLossFnKeyIsRead) {
  for (const auto& key : clipped_pg_keys()) {
    SCOPED_TRACE(key);
    const auto it = probes().find(key);
    ASSERT_NE(it, probes().end()) << "loss_fn." << key << " is accepted but has no probe";
    const Probe& p = it->second;
    ASSERT_THAT(p.change, HasSubstr(key));
    auto probed = p.setup;
    probed.push_back(p.change);
    if (p.changed) {
      EXPECT_TRUE(p.changed(parse(p.setup), parse(probed))) << "setting it changed nothing";
    } else {
      EXPECT_THROW(parse(probed), UsageError);
    }
  }
  EXPECT_EQ(probes().size(), clipped_pg_keys().size()) << "a probe for a key no list accepts";
}

TEST(LossKeys, ValuesTheLossCannotHonourAreRefusedNamingTheKey) {
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"loss_fn.ratio_clip_c=0.5", "ratio_clip_c"},
      {"loss_fn.ratio_clip_min=1.5", "ratio_clip_min"},
      {"loss_fn.reference_policy_kl_penalty=-1", "reference_policy_kl_penalty"},
      {"loss_fn.truncated_importance_sampling_ratio=2", "use_importance_sampling_correction"},
      {"loss_fn.sequence_level_importance_ratios=true", "token_level_loss"},
      {"+loss_fn.ratio_eps_min=0.2", "ratio_eps_min"},
  };
  for (const auto& [override_, named] : bad) {
    SCOPED_TRACE(override_);
    try {
      parse({override_});
      ADD_FAILURE() << "accepted";
    } catch (const UsageError& e) {
      EXPECT_THAT(e.what(), HasSubstr(named));
    }
  }
  // An unknown key names itself and the closest known one.
  try {
    parse({"+loss_fn.ratio_clip_maxx=0.3"});
    ADD_FAILURE() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("loss_fn.ratio_clip_maxx"));
    EXPECT_THAT(e.what(), HasSubstr("ratio_clip_max"));
  }
}

}  // namespace
}  // namespace tessel::policy
