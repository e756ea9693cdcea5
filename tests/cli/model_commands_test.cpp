// `tessel init-model` and `tessel logits` end to end (the built binary through
// popen). The logits of tests/golden/llama must equal the independent float64
// reference's, and the printed loss must equal the mean next-token
// cross-entropy recomputed here from those reference logits; a preset written
// by init-model reads back to the same model; bad input exits 2 with a message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "support/run_tessel.h"
#include "support/temp_dir.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>
#include "support/source_tree.h"

namespace {

using nlohmann::json;
using testing::HasSubstr;

using tessel::test_support::Result;
using tessel::test_support::run_tessel;
using tessel::test_support::TempDir;

std::filesystem::path golden_llama() { return tessel::test_support::golden_dir("llama"); }

std::string join(const std::vector<int64_t>& ids) {
  std::string s;
  for (int64_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

// Mean over t of logsumexp(logits[t]) - logits[t][tokens[t+1]], in double.
double mean_next_token_ce(const std::vector<std::vector<double>>& logits,
                          const std::vector<int64_t>& tokens) {
  double total = 0.0;
  for (size_t t = 0; t + 1 < tokens.size(); ++t) {
    const auto& row = logits[t];
    const double mx = *std::max_element(row.begin(), row.end());
    double s = 0.0;
    for (double v : row) s += std::exp(v - mx);
    total += mx + std::log(s) - row[static_cast<size_t>(tokens[t + 1])];
  }
  return total / static_cast<double>(tokens.size() - 1);
}

TEST(ModelCommands, GoldenLlamaLogitsAndLossMatchTheReference) {
  std::ifstream in(golden_llama() / "golden.json");
  ASSERT_TRUE(in);
  const json golden = json::parse(in);
  const auto tokens = golden["tokens"][0].get<std::vector<int64_t>>();
  const auto want = golden["logits"][0].get<std::vector<std::vector<double>>>();

  Result r =
      run_tessel("logits '" + golden_llama().string() + "' --tokens " + join(tokens) + " --json",
                 /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json out = json::parse(r.output);
  const auto got = out["logits"].get<std::vector<std::vector<double>>>();
  ASSERT_EQ(got.size(), tokens.size());
  for (size_t t = 0; t < got.size(); ++t) {
    ASSERT_EQ(got[t].size(), want[t].size()) << "position " << t;
    for (size_t v = 0; v < got[t].size(); ++v) {
      // Golden README: fp32 noise <= 3.3e-6 on O(1) logits.
      ASSERT_NEAR(got[t][v], want[t][v], 1e-5 + 1e-5 * std::abs(want[t][v]))
          << "position " << t << " vocab " << v;
    }
  }
  // All 11 next tokens of the row count (the golden labels' extra -100 at
  // (0,3) belongs to the golden batch, not to this command).
  ASSERT_TRUE(out["loss"].is_number());
  EXPECT_NEAR(out["loss"].get<double>(), mean_next_token_ce(want, tokens), 1e-5);
}

TEST(ModelCommands, TextOutputListsEveryPositionAndTheLoss) {
  Result r = run_tessel("logits '" + golden_llama().string() + "' --tokens 36,71,28");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("position 0 token 36"));
  EXPECT_THAT(r.output, HasSubstr("position 2 token 28"));
  EXPECT_THAT(r.output, HasSubstr("loss: "));
}

TEST(ModelCommands, InitModelWritesAPresetThatReadsBack) {
  TempDir tmp;
  const auto dir = tmp.path() / "qwen3";
  Result init = run_tessel("init-model tiny-qwen3 '" + dir.string() + "' --seed 7");
  ASSERT_EQ(init.exit_code, 0) << init.output;
  ASSERT_TRUE(std::filesystem::exists(dir / "model.safetensors"));
  std::ifstream cfg_in(dir / "config.json");
  ASSERT_TRUE(cfg_in);
  const json cfg = json::parse(cfg_in);
  EXPECT_EQ(cfg["model_type"], "qwen3");
  EXPECT_EQ(cfg["architectures"][0], "Qwen3ForCausalLM");
  const int64_t vocab = cfg["vocab_size"].get<int64_t>();

  const std::vector<int64_t> tokens = {3, 10, 17, 200, 0, 255, 42};
  const std::string tail = " --tokens " + join(tokens) + " --json";
  Result a = run_tessel("logits '" + dir.string() + "'" + tail, false);
  Result b = run_tessel("logits '" + dir.string() + "'" + tail, false);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(a.output, b.output) << "logits of one directory differ between runs";

  // The directory holds exactly the preset's weights for that seed, and the
  // seed matters.
  Result preset = run_tessel("logits tiny-qwen3 --seed 7" + tail, false);
  ASSERT_EQ(preset.exit_code, 0) << preset.output;
  EXPECT_EQ(preset.output, a.output);
  Result other = run_tessel("logits tiny-qwen3 --seed 8" + tail, false);
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_NE(other.output, a.output);

  const json out = json::parse(a.output);
  const auto logits = out["logits"].get<std::vector<std::vector<double>>>();
  ASSERT_EQ(logits.size(), tokens.size());
  for (const auto& row : logits) ASSERT_EQ(static_cast<int64_t>(row.size()), vocab);
  EXPECT_NEAR(out["loss"].get<double>(), mean_next_token_ce(logits, tokens), 1e-5);
  // Near-uniform at init (std 0.02): the loss is close to log(vocab).
  EXPECT_NEAR(out["loss"].get<double>(), std::log(static_cast<double>(vocab)), 0.5);

  Result single = run_tessel("logits '" + dir.string() + "' --tokens 5 --json", false);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_TRUE(json::parse(single.output)["loss"].is_null());
}

TEST(ModelCommands, InitModelFromAConfigJsonWritesTheSameWeights) {
  // --config takes any config.json: the preset's own gives the preset's
  // weights (same draws, parameter by parameter), in the dtype asked for.
  TempDir tmp;
  const auto preset_dir = tmp.path() / "preset";
  ASSERT_EQ(run_tessel("init-model tiny-llama '" + preset_dir.string() + "' --seed 4").exit_code, 0);
  const auto from_config = tmp.path() / "from_config";
  Result init = run_tessel("init-model --config '" + (preset_dir / "config.json").string() + "' '" +
                           from_config.string() + "' --seed 4");
  ASSERT_EQ(init.exit_code, 0) << init.output;
  EXPECT_THAT(init.output, HasSubstr("parameters"));
  const std::string tail = " --tokens 3,10,17,200 --json";
  Result a = run_tessel("logits '" + preset_dir.string() + "'" + tail, false);
  Result b = run_tessel("logits '" + from_config.string() + "'" + tail, false);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  EXPECT_EQ(a.output, b.output);

  const auto bf16 = tmp.path() / "bf16";
  ASSERT_EQ(run_tessel("init-model --config '" + (preset_dir / "config.json").string() + "' '" + bf16.string() +
                       "' --seed 4 --dtype bfloat16")
                .exit_code,
            0);
  std::ifstream cfg_in(bf16 / "config.json");
  EXPECT_EQ(json::parse(cfg_in)["torch_dtype"], "bfloat16");
  EXPECT_LT(std::filesystem::file_size(bf16 / "model.safetensors"),
            std::filesystem::file_size(preset_dir / "model.safetensors") * 6 / 10);

  Result bad_dtype = run_tessel("init-model tiny-llama '" + (tmp.path() / "y").string() + "' --dtype int8");
  EXPECT_EQ(bad_dtype.exit_code, 2) << bad_dtype.output;
  EXPECT_THAT(bad_dtype.output, HasSubstr("--dtype"));
  Result neither = run_tessel("init-model '" + (tmp.path() / "z").string() + "' --config " +
                              (tmp.path() / "missing" / "config.json").string());
  EXPECT_EQ(neither.exit_code, 2) << neither.output;
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "z"));
}

TEST(ModelCommands, UnknownPresetExits2ListingTheKnownOnes) {
  TempDir tmp;
  Result r = run_tessel("init-model tiny-nonsense '" + (tmp.path() / "x").string() + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("tiny-nonsense"));
  EXPECT_THAT(r.output, HasSubstr("tiny-llama"));
  EXPECT_THAT(r.output, HasSubstr("llama-100m"));
  EXPECT_FALSE(std::filesystem::exists(tmp.path() / "x"));

  Result file_target =
      run_tessel("init-model tiny-llama '" + (golden_llama() / "config.json").string() + "'");
  EXPECT_EQ(file_target.exit_code, 2) << file_target.output;
  EXPECT_THAT(file_target.output, HasSubstr("not a directory"));
}

TEST(ModelCommands, BadTokensAndModelsExit2WithAMessage) {
  const std::string model = "logits '" + golden_llama().string() + "' ";  // vocab 128
  Result too_big = run_tessel(model + "--tokens 3,128,5");
  EXPECT_EQ(too_big.exit_code, 2) << too_big.output;
  EXPECT_THAT(too_big.output, HasSubstr("token id 128 (position 1)"));
  EXPECT_THAT(too_big.output, HasSubstr("vocab_size is 128"));

  Result negative = run_tessel(model + "--tokens=-1,4");
  EXPECT_EQ(negative.exit_code, 2) << negative.output;
  EXPECT_THAT(negative.output, HasSubstr("token id -1 (position 0)"));

  Result not_a_number = run_tessel(model + "--tokens 3,x,5");
  EXPECT_EQ(not_a_number.exit_code, 2) << not_a_number.output;
  EXPECT_THAT(not_a_number.output, HasSubstr("'x' is not an integer token id"));

  Result empty_item = run_tessel(model + "--tokens 3,,5");
  EXPECT_EQ(empty_item.exit_code, 2) << empty_item.output;

  Result missing = run_tessel("logits /nonexistent/model --tokens 1,2");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_THAT(missing.output, HasSubstr("known presets"));
}

}  // namespace
