// `tessel dpo` end to end (the built binary through popen): the default run
// (examples/configs/dpo_default.yaml: a tiny Llama on the demo preference
// pairs, 2 processes launched through mpirun) shows the preference accuracy
// rising and the reward margin widening, in its progress lines and in
// metrics.jsonl, on the training and the validation pairs; a misspelt key
// exits 2 naming it before any process starts.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "support/metrics_records.h"
#include "support/run_tessel.h"
#include "support/temp_dir.h"

namespace {

using testing::HasSubstr;
using tessel::test_support::mean_of;
using tessel::test_support::metrics_records;
using tessel::test_support::Result;
using tessel::test_support::run_tessel;
using tessel::test_support::TempDir;

TEST(DpoCli, TheDefaultRunLearnsThePreferences) {
  TempDir dir;
  const std::string logs = (dir / "logs").string();
  const Result r = run_tessel("dpo --no-print-config logger.log_dir='" + logs + "'");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("starting 2 processes"));
  EXPECT_THAT(r.output, HasSubstr("accuracy"));
  EXPECT_THAT(r.output, HasSubstr("reward_margin"));
  const auto train = metrics_records(logs, "train");
  ASSERT_GE(train.size(), 40u);
  EXPECT_EQ(train.front()["accuracy"].get<double>(), 0.0);  // the policy starts as its reference
  const size_t n = train.size();
  EXPECT_GT(mean_of(train, n - 10, n, "accuracy"), 0.75);
  EXPECT_GT(mean_of(train, n - 10, n, "reward_margin"), mean_of(train, 1, 11, "reward_margin") + 2.0);
  const auto val = metrics_records(logs, "val");
  ASSERT_GE(val.size(), 2u);
  EXPECT_EQ(val.front()["accuracy"].get<double>(), 0.0);
  EXPECT_GT(val.back()["accuracy"].get<double>(), 0.55);
  EXPECT_GT(val.back()["reward_margin"].get<double>(), 1.0);
}

TEST(DpoCli, AMisspeltKeyExitsTwoNamingIt) {
  const Result r = run_tessel("dpo --no-print-config +dpo.sft_loss_wieght=0.5");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("dpo.sft_loss_wieght"));
  EXPECT_THAT(r.output, HasSubstr("sft_loss_weight"));
  EXPECT_THAT(r.output, testing::Not(HasSubstr("starting")));
}

}  // namespace
