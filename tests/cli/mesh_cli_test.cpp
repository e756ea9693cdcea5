// The built `tessel` program end to end (through popen): `tessel mesh` prints
// the hand-expected groups (and, on several nodes, which of them cross nodes),
// invalid layouts exit 2 with a message naming the value, and `tessel run`
// starts ranks through mpirun and forwards exit codes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cstdlib>
#include <string>

#include "support/run_tessel.h"

namespace {

using testing::HasSubstr;
using testing::Not;

using tessel::test_support::Result;
using tessel::test_support::run_tessel;

using Groups = std::vector<std::vector<int>>;

TEST(MeshCli, HsdpWorld16JsonGroups) {
  Result r = run_tessel("mesh --world 16 policy.dtensor_cfg.dp_replicate_size=2 --json",
                        /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["world_size"], 16);
  EXPECT_EQ(j["dp_size"], 16);
  EXPECT_EQ(j["dims"]["dp_replicate"], 2);
  EXPECT_EQ(j["dims"]["dp_shard"], 8);
  EXPECT_EQ(j["dims"]["cp"], 1);
  EXPECT_EQ(j["dims"]["tp"], 1);
  EXPECT_EQ(j["groups"]["dp_shard"].get<Groups>(),
            (Groups{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}}));
  EXPECT_EQ(j["groups"]["dp_replicate"].get<Groups>(),
            (Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}));
  EXPECT_EQ(j["groups"]["dp"].get<Groups>().size(), 1u);
  EXPECT_EQ(j["groups"]["tp"].get<Groups>().size(), 16u);
}

// Context parallel 4 over a world of 8: the cp groups, and the chunks of a
// 2050-token row (padded to 2056 = 8 chunks of 257) each cp rank holds.
TEST(MeshCli, ContextParallelGroupsAndChunks) {
  Result r = run_tessel("mesh --world 8 policy.dtensor_cfg.context_parallel_size=4 "
                        "policy.dtensor_cfg.dp_replicate_size=1 policy.max_total_sequence_length=2050 --json",
                        /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["dims"]["dp_shard"], 2);
  EXPECT_EQ(j["dims"]["cp"], 4);
  EXPECT_EQ(j["groups"]["cp"].get<Groups>(), (Groups{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_EQ(j["groups"]["dp_shard_cp"].get<Groups>(), (Groups{{0, 1, 2, 3, 4, 5, 6, 7}}));
  EXPECT_EQ(j["groups"]["dp"].get<Groups>(), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  const auto& cp = j["context_parallel"];
  EXPECT_EQ(cp["padded_seq_len"], 2056);
  EXPECT_EQ(cp["chunk_tokens"], 257);
  EXPECT_EQ(cp["tokens_per_rank"], 514);
  EXPECT_EQ(cp["chunks_by_cp_rank"].get<Groups>(), (Groups{{0, 7}, {1, 6}, {2, 5}, {3, 4}}));

  r = run_tessel("mesh --world 4 policy.dtensor_cfg.context_parallel_size=2 policy.dtensor_cfg.dp_replicate_size=1 "
                 "policy.max_total_sequence_length=64");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cp rank 1: chunks 1 and 2, tokens [16, 32) and [32, 48)"), std::string::npos) << r.output;
}

TEST(MeshCli, ExplicitConfigAndTpOverride) {
  const char* src = std::getenv("TESSEL_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  Result r = run_tessel(std::string("mesh '") + src +
                            "/examples/configs/sft.yaml' --world 8 "
                            "policy.dtensor_cfg.tensor_parallel_size=2 "
                            "policy.dtensor_cfg.dp_replicate_size=2 --json",
                        false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["groups"]["tp"].get<Groups>(), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(j["groups"]["dp_shard"].get<Groups>(), (Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(j["groups"]["dp_replicate"].get<Groups>(), (Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
}

TEST(MeshCli, WorldDefaultsToClusterSize) {
  Result r = run_tessel("mesh cluster.num_nodes=2 cluster.gpus_per_node=3 --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["world_size"], 6);
  EXPECT_EQ(j["groups"]["dp_shard"].get<Groups>(), (Groups{{0, 1, 2, 3, 4, 5}}));
}

TEST(MeshCli, DeleteAndAddOverrides) {
  // `~` deletes the key: dp_replicate_size falls back to 1 (no HSDP).
  Result r = run_tessel("mesh --world 4 ~policy.dtensor_cfg.dp_replicate_size --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["dims"]["dp_replicate"], 1);
  EXPECT_EQ(j["groups"]["dp_shard"].get<Groups>(), (Groups{{0, 1, 2, 3}}));
  // `+` adds a key; an unknown one under dtensor_cfg is rejected (exit 2).
  Result bad = run_tessel("mesh --world 4 +policy.dtensor_cfg.pipeline_parallel_size=2");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("pipeline_parallel_size"));
}

TEST(MeshCli, TextTableListsEveryGroup) {
  Result r = run_tessel("mesh --world 4 policy.dtensor_cfg.tensor_parallel_size=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("dp_replicate=1 x dp_shard=2 x cp=1 x tp=2 (world 4)"));
  EXPECT_THAT(r.output, HasSubstr("{0,1} {2,3}"));  // tp
  EXPECT_THAT(r.output, HasSubstr("{0,2} {1,3}"));  // dp_shard
  for (const char* name : {"tp", "cp", "dp_replicate", "dp_shard", "dp_shard_cp", "dp", "dp_cp"}) {
    EXPECT_THAT(r.output, HasSubstr(std::string("\n") + name + " ")) << name;
  }
}

// The node picture (cluster.num_nodes > 1), against groups worked out by hand
// from the row-major layout: rank = replicate * 4 + shard * 2 + tp.
TEST(MeshCli, TwoNodesShowWhichGroupsCrossThem) {
  Result r = run_tessel(
      "mesh cluster.num_nodes=2 cluster.gpus_per_node=4 policy.dtensor_cfg.dp_replicate_size=2 "
      "policy.dtensor_cfg.tensor_parallel_size=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("nodes: 2 x 4 ranks (node-major)\n"
                                  "  node 0: ranks 0-3\n"
                                  "  node 1: ranks 4-7\n"));
  EXPECT_THAT(r.output, HasSubstr("\ntp:           groups stay inside a node (ranks 0-1 | 2-3 | "
                                  "4-5 | 6-7)\n"));
  EXPECT_THAT(r.output, HasSubstr("\ncp:           size 1, no traffic\n"));
  EXPECT_THAT(r.output, HasSubstr("\ndp_replicate: every group crosses nodes (ranks 0,4 | 1,5 | "
                                  "2,6 | 3,7)\n"));
  EXPECT_THAT(r.output, HasSubstr("\ndp_shard:     groups stay inside a node (ranks 0,2 | 1,3 | "
                                  "4,6 | 5,7)\n"));
  EXPECT_THAT(r.output, HasSubstr("\ndp:           every group crosses nodes (ranks 0,2,4,6 | "
                                  "1,3,5,7)\n"));
}

TEST(MeshCli, NodePictureNamesTheGroupsThatCross) {
  // 2 nodes of 3 ranks, tp 2: only the tp group {2,3} straddles the boundary.
  Result r = run_tessel(
      "mesh cluster.num_nodes=2 cluster.gpus_per_node=3 policy.dtensor_cfg.dp_replicate_size=1 "
      "policy.dtensor_cfg.tensor_parallel_size=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\ntp:           1 of 3 groups cross nodes (ranks 2-3)\n"));
  EXPECT_THAT(r.output, HasSubstr("\ndp_shard:     every group crosses nodes (ranks 0,2,4 | "
                                  "1,3,5)\n"));

  // Eight replicate groups: the first four shown, then "...".
  r = run_tessel(
      "mesh cluster.num_nodes=2 cluster.gpus_per_node=8 policy.dtensor_cfg.dp_replicate_size=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\ndp_replicate: every group crosses nodes (ranks 0,8 | 1,9 | "
                                  "2,10 | 3,11 ...)\n"));
  EXPECT_THAT(r.output, HasSubstr("\ndp_shard:     groups stay inside a node (ranks 0-7 | "
                                  "8-15)\n"));
}

TEST(MeshCli, NodePictureOnlyForSeveralNodesThatSplitTheWorld) {
  Result r = run_tessel("mesh --world 4 cluster.num_nodes=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("nodes:")));
  r = run_tessel("mesh --world 6 cluster.num_nodes=4 policy.dtensor_cfg.dp_replicate_size=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("world 6 does not split evenly over cluster.num_nodes=4"));
  EXPECT_THAT(r.output, Not(HasSubstr("node 0")));
}

// Expert parallel 2 with HSDP 2 over 8 ranks: the dense mesh keeps every rank
// (dp_shard 4), the MoE mesh pairs consecutive ranks, and the text says how
// the two relate.
TEST(MeshCli, ExpertParallelPrintsBothMeshes) {
  Result r = run_tessel("mesh --world 8 policy.dtensor_cfg.expert_parallel_size=2 "
                        "policy.dtensor_cfg.dp_replicate_size=2 --json",
                        /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["dp_size"], 8);
  EXPECT_EQ(j["seed_dp_size"], 4);
  EXPECT_EQ(j["dims"]["dp_shard"], 4);
  EXPECT_EQ(j["moe"]["ep"], 2);
  EXPECT_EQ(j["moe"]["ep_shard"], 4);
  EXPECT_EQ(j["moe"]["ep_spans"].get<std::vector<std::string>>(), (std::vector<std::string>{"dp_shard"}));
  EXPECT_EQ(j["moe"]["ep_shard_spans"].get<std::vector<std::string>>(),
            (std::vector<std::string>{"dp_replicate", "dp_shard"}));
  EXPECT_EQ(j["groups"]["ep"].get<Groups>(), (Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(j["groups"]["ep_shard"].get<Groups>(), (Groups{{0, 2, 4, 6}, {1, 3, 5, 7}}));
  r = run_tessel("mesh --world 8 policy.dtensor_cfg.expert_parallel_size=2 policy.dtensor_cfg.dp_replicate_size=2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("moe:    ep_shard=4 x ep=2"));
  EXPECT_THAT(r.output, HasSubstr("seed dp_size 4  (world 8 / (tp 1 * cp 1 * ep 2)"));
  EXPECT_THAT(r.output, HasSubstr("ep groups span dp_shard; ep_shard groups span dp_replicate, dp_shard"));
  EXPECT_THAT(r.output, HasSubstr("{0,2,4,6} {1,3,5,7}"));
}

struct InvalidCli {
  std::string args;
  std::vector<std::string> message_parts;
};

TEST(MeshCli, InvalidLayoutsExit2WithMessage) {
  const std::vector<InvalidCli> cases = {
      {"mesh --world 8 policy.dtensor_cfg.dp_replicate_size=8",
       {"dp_replicate_size=8", "smaller than", "dp_size"}},
      {"mesh --world 12 policy.dtensor_cfg.dp_replicate_size=5",
       {"dp_replicate_size=5", "evenly divide"}},
      {"mesh --world 8 policy.dtensor_cfg.dp_replicate_size=0", {"dp_replicate_size", "positive"}},
      {"mesh --world 8 policy.dtensor_cfg.dp_replicate_size=-1", {"dp_replicate_size", "positive"}},
      {"mesh --world 16 policy.dtensor_cfg.dp_replicate_size=2 policy.dtensor_cfg._v2=false",
       {"HSDP only works on the DTensor v2 backend", "_v2=true"}},
      {"mesh --world 6 policy.dtensor_cfg.tensor_parallel_size=4", {"world size 6", "= 4"}},
      {"mesh --world 6 policy.dtensor_cfg.expert_parallel_size=4 policy.dtensor_cfg.dp_replicate_size=1",
       {"world size 6", "expert_parallel_size=4"}},
      {"mesh --world 0", {"world size 0"}},
      {"mesh --world 4 policy.dtensor_cfg.tensor_parallel_sise=2", {"tensor_parallel_sise"}},
  };
  for (const auto& c : cases) {
    Result r = run_tessel(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.output;
    for (const auto& part : c.message_parts) EXPECT_THAT(r.output, HasSubstr(part)) << c.args;
  }
}

TEST(MeshCli, MissingConfigFileExits2) {
  Result r = run_tessel("mesh /nonexistent/tessel.yaml --world 2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("/nonexistent/tessel.yaml"));
}

TEST(RunCli, StartsRanksThroughMpirun) {
  // Every rank prints the table; rank count is visible as repeated headers.
  Result r = run_tessel("run -n 2 -- mesh --world 2");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  size_t count = 0;
  for (size_t pos = r.output.find("(world 2)"); pos != std::string::npos;
       pos = r.output.find("(world 2)", pos + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 2u) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--bind-to none"));
  EXPECT_THAT(r.output, HasSubstr("OPENBLAS_NUM_THREADS=1"));
}

TEST(RunCli, ForwardsTheRanksExitCode) {
  Result r = run_tessel("run -n 2 -- mesh --world 8 policy.dtensor_cfg.dp_replicate_size=8");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("dp_replicate_size=8"));
}

TEST(RunCli, MissingMpirunIsAClearError) {
  Result r = run_tessel("run -n 2 -- mesh --world 2", true, "PATH=/nonexistent");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("mpirun not found on PATH"));
  EXPECT_THAT(r.output, HasSubstr("--mpirun"));
  Result r2 = run_tessel("run -n 2 --mpirun /nonexistent/mpirun -- mesh --world 2");
  EXPECT_EQ(r2.exit_code, 1) << r2.output;
  EXPECT_THAT(r2.output, HasSubstr("/nonexistent/mpirun not found"));
}

TEST(RunCli, ChecksTesselSettingsBeforeLaunching) {
  Result r = run_tessel("run -n 2 -- mesh --world 2", true, "TESSEL_GEMM=mkl");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("TESSEL_GEMM='mkl' is unknown"));
  EXPECT_THAT(r.output, Not(HasSubstr("tessel run: ")));  // mpirun's command line, printed before it starts
}

TEST(RunCli, NeedsACommandAndPositiveRanks) {
  EXPECT_EQ(run_tessel("run -n 2").exit_code, 2);
  EXPECT_NE(run_tessel("run -n 0 -- mesh --world 2").exit_code, 0);
}

}  // namespace
