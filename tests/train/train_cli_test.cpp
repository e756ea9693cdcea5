// `tessel train` end to end through the built binary (popen): the same run on
// 1 process and on every parallel layout (separate runs, launched by tessel
// itself through mpirun) gives the same loss per step (SPEC 8); the built-in
// default recipe runs with no config; bad input exits with code 2 and a
// message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "support/run_tessel.h"
#include "train/cli_fixture.h"

namespace tessel::train {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using test_support::Result;
using test_support::run_tessel;

using testing::train_records;

class TrainCli : public testing::TrainCliFixture {};

TEST_F(TrainCli, EveryLayoutMatchesOneProcessForTenSteps) {
  // Global batch 12 divides by every dp size below (1, 2, 3, 4); micro batch 1
  // means 12, 6, 4 or 3 accumulation steps per rank.
  const std::string cfg = write_config({"sft.max_num_steps=10", "policy.train_global_batch_size=12",
                                        "policy.train_micro_batch_size=1"});
  struct Layout {
    const char* name;
    std::string args;
    size_t ranks;
  };
  const std::string tp2 = " policy.dtensor_cfg.tensor_parallel_size=2";
  const std::string sp = " policy.dtensor_cfg.sequence_parallel=true";
  const std::vector<Layout> layouts = {
      {"world1", "--nproc 1", 1},
      {"fsdp3", "--nproc 3", 3},
      {"hsdp2x2", "--nproc 4 policy.dtensor_cfg.dp_replicate_size=2", 4},
      // The opt-in accumulation: full unsharded gradients until the last of
      // the 3 micro batches (the default reduce-scatters each one).
      {"hsdp2x2_unsharded_accumulation",
       "--nproc 4 policy.dtensor_cfg.dp_replicate_size=2 policy.dtensor_cfg.accumulate_unsharded_grads=true", 4},
      // Node-shared parameters: each shard group's (of two ranks) parameters
      // in memory its ranks share, no all-gathers.
      {"hsdp2x2_node_shared",
       "--nproc 4 policy.dtensor_cfg.dp_replicate_size=2 policy.dtensor_cfg.node_shared_params=true", 4},
      {"tp2", "--nproc 2" + tp2, 2},
      {"tp2_sp", "--nproc 2" + tp2 + sp, 2},
      {"tp2_x_fsdp2", "--nproc 4" + tp2, 4},
      // HSDP 2x2 x TP 2 with sequence parallelism: 8 processes on this box's
      // 2 cores, still a few seconds for the tiny model.
      {"hsdp2x2_x_tp2_sp", "--nproc 8 policy.dtensor_cfg.dp_replicate_size=2" + tp2 + sp, 8},
  };
  std::vector<std::vector<nlohmann::json>> runs;
  for (const auto& l : layouts) {
    const std::string logs = (dir_ / l.name).string();
    const Result r = run_tessel("train " + cfg + " " + l.args + " logger.log_dir=" + logs +
                                " --no-print-config");
    ASSERT_EQ(r.exit_code, 0) << l.name << ":\n" << r.output;
    if (l.args.find("node_shared_params=true") != std::string::npos) {
      // RSS counts the shared copy in every rank: the closing line says how much.
      EXPECT_THAT(r.output, HasSubstr("shared by the node's ranks")) << l.name;
    }
    runs.push_back(train_records(logs));
    ASSERT_EQ(runs.back().size(), 10u) << l.name << ":\n" << r.output;
  }
  for (size_t k = 1; k < runs.size(); ++k) {
    for (size_t s = 0; s < 10; ++s) {
      const double ref = runs[0][s]["loss"].get<double>();
      const double got = runs[k][s]["loss"].get<double>();
      // fp32 tolerance: reductions run in a different order per layout.
      EXPECT_NEAR(got, ref, 2e-5 * std::abs(ref)) << layouts[k].name << " step " << s + 1;
      EXPECT_NEAR(runs[k][s]["grad_norm"].get<double>(), runs[0][s]["grad_norm"].get<double>(),
                  1e-4 * runs[0][s]["grad_norm"].get<double>())
          << layouts[k].name << " step " << s + 1;
      EXPECT_EQ(runs[k][s]["valid_tokens"], runs[0][s]["valid_tokens"]);
      // Every rank's peak RSS at steps 1 and 10 (logger.rank_metrics_period 10).
      if (s == 0 || s == 9) {
        EXPECT_EQ(runs[k][s]["peak_rss_bytes"].size(), layouts[k].ranks);
      } else {
        EXPECT_FALSE(runs[k][s].contains("peak_rss_bytes"));
      }
    }
  }
  EXPECT_LT(runs[0][9]["loss"].get<double>(), runs[0][0]["loss"].get<double>());
}

TEST_F(TrainCli, DefaultRecipeRunsWithoutConfig) {
  // The built-in default (4 processes, HSDP 2x2, demo set), shortened.
  const std::string logs = (dir_ / "default").string();
  const Result r = run_tessel("train sft.max_num_steps=3 sft.val_period=0 sft.val_at_start=false "
                              "logger.log_dir=" + logs);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("resolved config"));
  EXPECT_THAT(r.output, HasSubstr("dp_replicate_size: 2"));
  EXPECT_THAT(r.output, HasSubstr("step 3/3"));
  const auto records = train_records(logs);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0]["peak_rss_bytes"].size(), 4u);
  EXPECT_TRUE(std::filesystem::exists(logs + "/loss_curve.svg"));
}

TEST_F(TrainCli, BadInputExitsWithUsageCode) {
  const std::string cfg = write_config();
  Result r = run_tessel("train " + cfg + " --nproc 1 sft.max_num_stepz=3");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("max_num_steps"));

  r = run_tessel("train " + cfg + " --nproc 1 policy.train_global_batch_size=6");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("not a multiple"));

  r = run_tessel("train " + cfg + " --nproc 1 data.train.dataset_name=" +
                 (dir_ / "missing.jsonl").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("missing.jsonl"));

  r = run_tessel("train " + (dir_ / "no_such.yaml").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no_such.yaml"));

  // Environment settings are checked before any process is started.
  const std::vector<std::pair<std::string, std::string>> bad_settings = {
      {"TESSEL_GEMM=mkl", "TESSEL_GEMM='mkl' is unknown"},
      {"TESSEL_DEVICE_KERNELS=triton", "TESSEL_DEVICE_KERNELS='triton' is unknown"},
      {"TESSEL_PROFILE_STEP=0", "TESSEL_PROFILE_STEP='0': give the step to profile"},
      {"TESSEL_ALLREDUCE_ALGO=ring", "TESSEL_ALLREDUCE_ALGO='ring' is unknown"},
      {"TESSEL_ENGINE_NICE=25", "TESSEL_ENGINE_NICE='25'"},
      {"TESSEL_COLLECTIVE_TIMEOUT_S=soon", "TESSEL_COLLECTIVE_TIMEOUT_S='soon'"},
  };
  for (const auto& [setting, message] : bad_settings) {
    r = run_tessel("train " + cfg + " --nproc 2", true, setting);
    EXPECT_EQ(r.exit_code, 2) << setting << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(message));
    EXPECT_THAT(r.output, Not(HasSubstr("starting 2 processes"))) << setting;
  }
}

}  // namespace
}  // namespace tessel::train
