// `tessel plan` end to end through the built binary: the chosen plan source,
// the modules it touches, and every rank's parameter bytes for the real
// Llama-3.1-8B config under TP 2 x HSDP 2x4 against a hand computation from
// the model's published dimensions; bad plans and impossible layouts exit 2
// with a message saying what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include <unistd.h>

#include "support/run_tessel.h"
#include "support/source_tree.h"
#include "support/temp_dir.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using tessel::test_support::run_tessel;

std::string source(const std::string& rel) {
  return (tessel::test_support::source_tree() / rel).string();
}

const std::string kRecipe = source("examples/configs/recipes/llm/sft-llama3.2-1b-2n8g-hsdp.yaml");
const std::string kLlama8B = "policy.model_name=" + source("tests/models/hf_configs/meta-llama__Llama-3.1-8B");

TEST(PlanCli, Llama8BTp2OnSixteenRanksHasHandComputedBytes) {
  // The recipe: 2 nodes x 8, dp_replicate 2; with tp 2 the shard group is 4.
  const auto r = run_tessel("plan " + kRecipe + " " + kLlama8B + " policy.dtensor_cfg.tensor_parallel_size=2 --json",
                            /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["plan"]["source"], "optimized");
  EXPECT_EQ(j["world_size"], 16);
  EXPECT_EQ(j["mesh"]["dp_shard"], 4);
  EXPECT_EQ(j["model_param_elements"].get<int64_t>(), 8030261248LL);
  bool q_proj = false;
  for (const auto& m : j["modules"]) q_proj |= m["module"] == "model.layers.31.self_attn.q_proj";
  EXPECT_TRUE(q_proj);

  // Llama-3.1-8B: hidden 4096, intermediate 14336, vocab 128256, 32 layers,
  // 32 heads and 8 kv heads of 128. Split over tp: q, k, v, o, gate, up,
  // down, the embedding and lm_head; whole on every tp rank: 65 norms.
  const int64_t per_layer = 4096LL * (4096 + 1024 + 1024 + 4096) + 3LL * 14336 * 4096;
  const int64_t split = 32 * per_layer + 2LL * 128256 * 4096;
  const int64_t norms = 65LL * 4096;
  const int64_t per_tp_rank = split / 2 + norms;
  // Every tp-local dim 0 (2048, 512, 4096, 7168, 64128) divides by 4: no padding.
  ASSERT_EQ(j["ranks"].size(), 16u);
  for (const auto& rank : j["ranks"]) {
    EXPECT_EQ(rank["param_elements"].get<int64_t>(), per_tp_rank / 4) << rank.dump();
    EXPECT_EQ(rank["padded_param_bytes"].get<int64_t>(), per_tp_rank);  // = 4 bytes x per_tp_rank / 4
  }
}

// Activations per rank fall with the cp share of each row: at cp 4 a rank
// saves a quarter of the tokens' layer activations and none of the whole
// row's attention scores, so well under a third of cp 1's.
TEST(PlanCli, ContextParallelSplitsRowsAndActivations) {
  const std::string base = "plan --world 4 policy.model_name=tiny-llama policy.dtensor_cfg.dp_replicate_size=1 "
                           "policy.max_total_sequence_length=2048 --json ";
  auto r = run_tessel(base + "policy.dtensor_cfg.context_parallel_size=4", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["context_parallel"]["tokens_per_rank"], 512);
  const int64_t cp4 = j["activation_bytes_per_rank"].get<int64_t>();
  const int64_t cp1 = j["activation_bytes_per_rank_cp1"].get<int64_t>();
  EXPECT_LT(cp4 * 3, cp1) << cp4 << " vs " << cp1;
  r = run_tessel(base + "policy.dtensor_cfg.context_parallel_size=1", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["activation_bytes_per_rank"].get<int64_t>(), cp1);
  EXPECT_EQ(j["context_parallel"]["tokens_per_rank"], 2048);
}

TEST(PlanCli, TextOutputNamesSourceStylesAndBytes) {
  const auto r = run_tessel("plan --world 4 policy.model_name=tiny-llama policy.dtensor_cfg.dp_replicate_size=1 "
                            "policy.dtensor_cfg.tensor_parallel_size=2 policy.dtensor_cfg.sequence_parallel=true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("plan:   optimized"));
  EXPECT_THAT(r.output, HasSubstr("SequenceParallel"));
  EXPECT_THAT(r.output, HasSubstr("tp 1, shard 1 (ranks 3)"));
}

// The model is FSDP's default; a run with node-shared parameters is told so.
TEST(PlanCli, SaysNodeSharedParamsAreNotModelled) {
  const std::string base = "plan --world 2 policy.model_name=tiny-llama policy.dtensor_cfg.dp_replicate_size=1 ";
  auto r = run_tessel(base + "policy.dtensor_cfg.node_shared_params=true");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("node_shared_params=true is not modelled"));
  r = run_tessel(base);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("node_shared_params")));
}

// The line of `output` holding `needle` ("" when none does).
std::string line_with(const std::string& output, const std::string& needle) {
  const size_t at = output.find(needle);
  if (at == std::string::npos) return "";
  const size_t begin = output.rfind('\n', at) + 1;  // npos + 1 == 0 on the first line
  return output.substr(begin, output.find('\n', at) - begin);
}

size_t count_of(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

TEST(PlanCli, TextGroupsTheLayersOfEachModuleAndVerboseListsThemAll) {
  const std::string args = "plan " + kRecipe + " " + kLlama8B + " policy.dtensor_cfg.tensor_parallel_size=2";
  const auto grouped = run_tessel(args);  // stderr too: the plan line must not come twice
  ASSERT_EQ(grouped.exit_code, 0) << grouped.output;
  EXPECT_EQ(count_of(grouped.output, "tensor-parallel plan:"), 1u) << grouped.output;
  // 32 layers of Llama-3.1-8B, every one with the optimized plan's style.
  for (const char* module : {"self_attn.q_proj", "self_attn.o_proj", "mlp.down_proj"}) {
    const std::string line = line_with(grouped.output, std::string("model.layers.{0..31}.") + module + " ");
    EXPECT_THAT(line, HasSubstr("Parallel")) << module << "\n" << grouped.output;
    EXPECT_EQ(count_of(grouped.output, std::string(".") + module + " "), 1u) << module;
  }
  EXPECT_THAT(grouped.output, Not(HasSubstr("model.layers.7.")));
  EXPECT_THAT(line_with(grouped.output, "lm_head "), HasSubstr("[lm_head]"));

  const auto verbose = run_tessel(args + " --verbose");
  ASSERT_EQ(verbose.exit_code, 0) << verbose.output;
  EXPECT_EQ(count_of(verbose.output, "tensor-parallel plan:"), 1u);
  EXPECT_EQ(count_of(verbose.output, ".self_attn.q_proj "), 32u) << verbose.output;
  for (int layer : {0, 7, 31}) {
    EXPECT_THAT(verbose.output, HasSubstr("model.layers." + std::to_string(layer) + ".mlp.down_proj "));
  }
  EXPECT_THAT(verbose.output, Not(HasSubstr("{0..31}")));
}

// --predict on the seed's 16-GPU / 2-node recipe with a realistic cluster
// (NVLink-class inside a node, 200 Gbit/s between nodes, an H100-class rate,
// NCCL's ring collectives):
// the inter-node link binds and HSDP with one replica per node wins; with
// compute that hides all communication, plain FSDP (less memory) does.
TEST(PlanCli, PredictRecommendsOneReplicaPerNodeWhenTheLinkBinds) {
  const std::string llama_1b = "policy.model_name=" + source("tests/models/hf_configs/meta-llama__Llama-3.2-1B");
  const std::string cluster =
      " --predict --json --collectives ring --intra-node-gbit 3600 --gflops 400000 --latency-us 10";
  auto r = run_tessel("plan " + kRecipe + " " + llama_1b + cluster + " --inter-node-gbit 200", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output)["prediction"];
  EXPECT_EQ(j["recommended_dp_replicate_size"], 2) << j.dump(1);
  EXPECT_THAT(j["recommendation"].get<std::string>(), HasSubstr("dp_replicate_size=2 (= nodes): the inter-node link binds"));
  // Every allowed dp_replicate_size was considered: 1, 2, 4, 8 (not 16).
  std::vector<int> considered;
  for (const auto& c : j["candidates"]) considered.push_back(c["dp_replicate_size"].get<int>());
  EXPECT_EQ(considered, (std::vector<int>{1, 2, 4, 8}));
  // HSDP 2 x 8: only the replicate all-reduce crosses nodes.
  const auto& hsdp = j["candidates"][1];
  EXPECT_EQ(hsdp["bytes_per_step"]["dp_shard_cp"]["other_node"], 0);
  EXPECT_GT(hsdp["bytes_per_step"]["dp_replicate"]["other_node"].get<int64_t>(), 0);
  EXPECT_LT(hsdp["inter_node_bytes_per_step"].get<int64_t>(), j["candidates"][0]["inter_node_bytes_per_step"].get<int64_t>());
  // A described accelerator cluster (--gflops): the reductions' memory work
  // is the devices', not charged to this machine's copy rate.
  EXPECT_GT(hsdp["reduction_copy_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(hsdp["reduction_memory_s"].get<double>(), 0);

  // Every tensor-parallel size inside a node was predicted (1, 2, 4, 8),
  // each with its own dp_replicate choice; with no memory limit the fastest
  // (tp only adds activation collectives here) is tp 1.
  std::vector<int> tps;
  for (const auto& c : j["tp_candidates"]) tps.push_back(c["tp"].get<int>());
  EXPECT_EQ(tps, (std::vector<int>{1, 2, 4, 8}));
  EXPECT_EQ(j["recommended_tp_size"], 1) << j.dump(1);
  // A rank that may hold 8 GiB: the smallest tp whose largest rank fits.
  r = run_tessel("plan " + kRecipe + " " + llama_1b + cluster + " --inter-node-gbit 200 --memory-per-rank-gib 8", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(r.output)["prediction"];
  const int chosen = j["recommended_tp_size"].get<int>();
  for (const auto& c : j["tp_candidates"]) {
    const bool fits = c["rss_bytes"].get<int64_t>() <= (int64_t{8} << 30);
    if (c["tp"].get<int>() < chosen) {
      EXPECT_FALSE(fits) << c.dump();
    } else if (c["tp"].get<int>() == chosen) {
      EXPECT_TRUE(fits) << c.dump();
    }
  }
  EXPECT_GT(chosen, 1) << j.dump(1);

  // Where compute hides every layout's communication, plain FSDP (the least
  // memory per rank) is recommended.
  r = run_tessel("plan " + source("examples/configs/default.yaml") +
                     " cluster.num_nodes=2 cluster.gpus_per_node=2 --predict --json --gflops 0.01 "
                     "--inter-node-gbit 10 --intra-node-gbit 100",
                 false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  j = nlohmann::json::parse(r.output)["prediction"];
  EXPECT_EQ(j["recommended_dp_replicate_size"], 1) << j.dump(1);
  EXPECT_THAT(j["recommendation"].get<std::string>(), HasSubstr("plain FSDP"));
  EXPECT_THAT(j["recommendation"].get<std::string>(), HasSubstr("does not bind"));
}

// What `plan --predict` says the tensors of a step peak at, against what a
// real run's tensors peaked at, counted by the wrapper around ATen's
// allocator (TESSEL_COUNT_TENSOR_BYTES=1, metrics.jsonl's
// peak_device_bytes_max): a small Llama (2 layers, hidden 256, vocabulary
// 4096), 4 rows of 256 tokens, one process, float32 (where the attention
// keeps its probabilities) and bf16 (HF's compositions, cast copies). Within
// 10%: the figure is meant for fitting a batch to a device's memory.
TEST(PlanCli, PredictedTensorPeakIsARunsCountedPeak) {
  const tessel::test_support::TempDir dir;
  dir.write("config/config.json", R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "vocab_size": 4096, "hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 1024,
    "rms_norm_eps": 1e-5, "hidden_act": "silu", "rope_theta": 10000.0, "tie_word_embeddings": false,
    "torch_dtype": "float32", "bos_token_id": 1, "eos_token_id": 2})");
  const std::string model = (dir / "model").string();
  auto r = run_tessel("init-model --config " + (dir / "config/config.json").string() + " " + model + " --seed 3");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string precision : {"float32", "bfloat16"}) {
    const std::string shape = " policy.model_name=" + model + " policy.max_total_sequence_length=256"
                              " policy.train_global_batch_size=4 policy.train_micro_batch_size=4"
                              " policy.precision=" + precision;
    const std::string logs = (dir / ("logs-" + precision)).string();
    r = run_tessel("train " + source("examples/configs/sft.yaml") + shape + " policy.tokenizer.name=" + model +
                       " data.train.dataset_name=synthetic '~data.validation' checkpointing.enabled=false"
                       " sft.max_num_steps=2 sft.val_period=0 sft.val_at_start=false sft.val_at_end=false"
                       " logger.log_dir=" + logs + " --nproc 1 --no-print-config",
                   true, "TESSEL_COUNT_TENSOR_BYTES=1 OMP_NUM_THREADS=1");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_THAT(r.output, HasSubstr("at most in tensors")) << r.output;
    int64_t counted = 0;
    std::ifstream metrics(logs + "/metrics.jsonl");
    for (std::string line; std::getline(metrics, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("peak_device_bytes_max")) counted = std::max(counted, j["peak_device_bytes_max"].get<int64_t>());
    }
    ASSERT_GT(counted, 0) << precision;
    r = run_tessel("plan " + source("examples/configs/sft.yaml") + shape + " --world 1 --predict --json --gflops 10",
                   false);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto predicted =
        nlohmann::json::parse(r.output)["prediction"]["this_layout"]["memory_per_rank"]["tensor_bytes"].get<int64_t>();
    EXPECT_NEAR(static_cast<double>(predicted) / static_cast<double>(counted), 1.0, 0.10)
        << precision << ": predicted " << predicted << " counted " << counted;
  }
}

// Pretend nodes share this machine's cores: a given --core-share says what a
// rank gets, so with one core each the transport's CPU is charged, however
// many cores the machine has per described node (2 nodes x 1 rank here).
TEST(PlanCli, PredictChargesTheTransportWhereAGivenShareLeavesNoSpareCore) {
  const auto r = run_tessel("plan " + source("examples/configs/sft.yaml") +
                                " policy.model_name=tiny-llama policy.tokenizer.name=tiny-llama "
                                "policy.max_total_sequence_length=32 policy.train_micro_batch_size=1 "
                                "policy.train_global_batch_size=2 cluster.num_nodes=2 cluster.gpus_per_node=1 "
                                "--predict --json --core-share 1",
                            false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output)["prediction"];
  EXPECT_GT(j["this_layout"]["transport_cpu_s"].get<double>(), 0) << j.dump(1);
  EXPECT_THAT(j["cluster"]["source"].get<std::string>(), HasSubstr("no core to spare"));
  // FSDP over the 2 ranks packs and adds its gradients on the ranks' cores.
  EXPECT_GT(j["this_layout"]["reduction_copy_bytes"].get<int64_t>(), 0) << j.dump(1);
  EXPECT_GT(j["this_layout"]["reduction_memory_s"].get<double>(), 0) << j.dump(1);

  // The link's CPU per byte as measured elsewhere (scripts/cluster/link_cpu.sh):
  // each of the 2 ranks sends half the step's inter-node bytes, and nothing
  // to a peer on its node.
  const auto given = run_tessel("plan " + source("examples/configs/sft.yaml") +
                                    " policy.model_name=tiny-llama policy.tokenizer.name=tiny-llama "
                                    "policy.max_total_sequence_length=32 policy.train_micro_batch_size=1 "
                                    "policy.train_global_batch_size=2 cluster.num_nodes=2 cluster.gpus_per_node=1 "
                                    "--predict --json --core-share 1 --inter-node-cpu-ns-per-byte 2.5",
                                false);
  ASSERT_EQ(given.exit_code, 0) << given.output;
  j = nlohmann::json::parse(given.output)["prediction"];
  const double per_rank = j["this_layout"]["inter_node_bytes_per_step"].get<double>() / 2;
  EXPECT_NEAR(j["this_layout"]["transport_cpu_s"].get<double>(), per_rank * 2.5e-9, per_rank * 2.5e-9 * 1e-9)
      << j.dump(1);
  EXPECT_THAT(j["cluster"]["source"].get<std::string>(), HasSubstr("as given across nodes"));
}

class PlanCliCustomPlans : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("tessel_plan_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "plans.yaml") << "bad_style:\n  lm_head: sideways\n"
                                          "no_match:\n  model.nothing.*: colwise\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string plan(const std::string& key) const {
    return "policy.dtensor_cfg.custom_parallel_plan=" + (dir_ / "plans.yaml").string() + ":" + key;
  }
  std::filesystem::path dir_;
};

TEST_F(PlanCliCustomPlans, ALayerWithItsOwnStyleSplitsItsGroup) {
  // First match wins: layer 4's up_proj is rowwise, every other layer's colwise.
  std::ofstream(dir_ / "plans.yaml", std::ios::app) << "layer_four:\n"
                                                       "  model.layers.4.mlp.up_proj: rowwise\n"
                                                       "  model.layers.*.mlp.up_proj: colwise\n";
  const auto r = run_tessel("plan --world 2 " + kLlama8B +
                            " policy.dtensor_cfg.dp_replicate_size=1 policy.dtensor_cfg.tensor_parallel_size=2 " +
                            plan("layer_four"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(line_with(r.output, "model.layers.{0..3,5..31}.mlp.up_proj "),
              HasSubstr("[model.layers.*.mlp.up_proj]"))
      << r.output;
  EXPECT_THAT(line_with(r.output, "model.layers.4.mlp.up_proj "), HasSubstr("[model.layers.4.mlp.up_proj]"))
      << r.output;
  EXPECT_EQ(count_of(r.output, ".mlp.up_proj "), 2u) << r.output;
}

TEST_F(PlanCliCustomPlans, BadPlansAndLayoutsExitTwo) {
  const std::string tp2 = " --world 2 policy.dtensor_cfg.dp_replicate_size=1 policy.dtensor_cfg.tensor_parallel_size=2 ";
  auto r = run_tessel("plan" + tp2 + plan("bad_style"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("sideways"));
  EXPECT_THAT(r.output, HasSubstr("colwise"));  // the supported list

  r = run_tessel("plan" + tp2 + plan("no_match"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("model.nothing.*"));

  // tiny-llama has 2 kv heads: the optimized plan refuses tp 4, and the HF
  // fallback would split k_proj into half heads.
  r = run_tessel("plan --world 4 policy.dtensor_cfg.dp_replicate_size=1 policy.dtensor_cfg.tensor_parallel_size=4");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("whole heads"));

  r = run_tessel("plan --world 3" + std::string(" policy.dtensor_cfg.dp_replicate_size=1 "
                                                "policy.dtensor_cfg.tensor_parallel_size=2"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("tensor_parallel_size"));
}

}  // namespace
