// `tessel generate` end to end (the built binary through popen): greedy
// generation from a golden model equals Hugging Face transformers' greedy
// model.generate (tests/golden/<case>/generation.json,
// generate_generation.py), tokens exactly and log-probs within 1e-4, for one
// prompt (--tokens) and for a batch (--prompts) on one process and on two
// under tensor parallelism; sampling with a seed gives the same tokens on one
// process and on two (FSDP 2, TP 2); bad input exits 2 naming the line or
// the option.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "support/run_tessel.h"
#include "support/source_tree.h"
#include "support/temp_dir.h"

namespace {

using nlohmann::json;
using testing::HasSubstr;
using tessel::test_support::Result;
using tessel::test_support::run_tessel;
using tessel::test_support::TempDir;

using tessel::test_support::golden_dir;

json golden_generation(const std::string& name) {
  std::ifstream in(golden_dir(name) / "generation.json");
  return json::parse(in);
}

std::string comma_list(const std::vector<int64_t>& ids) {
  std::string out;
  for (int64_t id : ids) out += (out.empty() ? "" : ",") + std::to_string(id);
  return out;
}

// The printed JSON lines (one per prompt).
std::vector<json> json_lines(const std::string& output) {
  std::istringstream lines(output);
  std::vector<json> out;
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.front() == '{') out.push_back(json::parse(line));
  }
  return out;
}

void expect_golden_row(const json& got, const json& g, size_t row) {
  const auto tokens = got["tokens"].get<std::vector<int64_t>>();
  const auto logprobs = got["logprobs"].get<std::vector<double>>();
  EXPECT_EQ(tokens, g["tokens"][row].get<std::vector<int64_t>>()) << "row " << row;
  const auto want = g["logprobs"][row].get<std::vector<double>>();
  ASSERT_EQ(logprobs.size(), want.size()) << "row " << row;
  for (size_t t = 0; t < want.size(); ++t) EXPECT_NEAR(logprobs[t], want[t], 1e-4) << "row " << row << " step " << t;
  EXPECT_EQ(got["finish_reason"], "length");
}

TEST(GenerateCli, GreedyMatchesTransformersForOnePromptAndABatch) {
  TempDir dir;
  // Llama decoded tensor-parallel over 2 ranks; a windowed mixture of experts replicated on each of 2.
  for (const auto& [name, two] : std::vector<std::pair<std::string, std::string>>{
           {"llama", " --nproc 2 policy.dtensor_cfg.tensor_parallel_size=2"}, {"mixtral_window", " --nproc 2"}}) {
    SCOPED_TRACE(name);
    const json g = golden_generation(name);
    const std::string model = "generate '" + golden_dir(name).string() + "' --greedy --json --max-new-tokens " +
                              std::to_string(g["max_new_tokens"].get<int64_t>());
    const Result one = run_tessel(model + " --tokens " + comma_list(g["prompts"][0].get<std::vector<int64_t>>()), false);
    ASSERT_EQ(one.exit_code, 0) << one.output;
    const auto single = json_lines(one.output);
    ASSERT_EQ(single.size(), 1u) << one.output;
    expect_golden_row(single[0], g, 0);

    std::string lines;
    for (const auto& prompt : g["prompts"]) lines += json{{"tokens", prompt}}.dump() + "\n";
    const auto prompts = dir.write(std::string(name) + ".jsonl", lines);
    for (const std::string& layout : {std::string(), two}) {
      const Result batch = run_tessel(model + " --prompts '" + prompts.string() + "'" + layout, false);
      ASSERT_EQ(batch.exit_code, 0) << batch.output;
      const auto rows = json_lines(batch.output);
      ASSERT_EQ(rows.size(), g["prompts"].size()) << batch.output;
      for (size_t r = 0; r < rows.size(); ++r) expect_golden_row(rows[r], g, r);
    }
  }
}

TEST(GenerateCli, TheSameSeedSamplesTheSameTokensOnOneProcessAndOnTwo) {
  TempDir dir;
  const auto prompts = dir.write("p.jsonl", "{\"tokens\": [3, 10, 17]}\n{\"tokens\": [40, 2]}\n{\"tokens\": [9]}\n");
  const std::string base = "generate '" + golden_dir("llama").string() + "' --prompts '" + prompts.string() +
                           "' --max-new-tokens 10 --temperature 0.8 --top-p 0.9 --top-k 50 --json";
  const Result one = run_tessel(base + " --seed 7", false);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto ref = json_lines(one.output);
  ASSERT_EQ(ref.size(), 3u) << one.output;
  for (const std::string layout : {" --nproc 2", " --nproc 2 policy.dtensor_cfg.tensor_parallel_size=2"}) {
    const Result two = run_tessel(base + " --seed 7" + layout, false);
    ASSERT_EQ(two.exit_code, 0) << two.output;
    const auto rows = json_lines(two.output);
    ASSERT_EQ(rows.size(), 3u) << two.output;
    for (size_t r = 0; r < 3; ++r) {
      EXPECT_EQ(rows[r]["tokens"], ref[r]["tokens"]) << layout << " row " << r;
      const auto got = rows[r]["logprobs"].get<std::vector<double>>(), want = ref[r]["logprobs"].get<std::vector<double>>();
      ASSERT_EQ(got.size(), want.size());
      for (size_t t = 0; t < got.size(); ++t) EXPECT_NEAR(got[t], want[t], 2e-5) << layout << " row " << r;
    }
  }
  // Another seed draws other tokens.
  const Result other = run_tessel(base + " --seed 8", false);
  ASSERT_EQ(other.exit_code, 0) << other.output;
  const auto rows = json_lines(other.output);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_FALSE(rows[0]["tokens"] == ref[0]["tokens"] && rows[1]["tokens"] == ref[1]["tokens"] &&
               rows[2]["tokens"] == ref[2]["tokens"]);
}

TEST(GenerateCli, BadInputNamesTheLineOrOption) {
  TempDir dir;
  const std::string model = "generate '" + golden_dir("llama").string() + "'";
  const auto bad_id = dir.write("bad_id.jsonl", "{\"tokens\": [1, 2]}\n{\"tokens\": [1, 500]}\n");
  Result r = run_tessel(model + " --prompts '" + bad_id.string() + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("bad_id.jsonl:2"));
  const auto no_tokens = dir.write("no_tokens.jsonl", "{\"ids\": [1, 2]}\n");
  r = run_tessel(model + " --prompts '" + no_tokens.string() + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no_tokens.jsonl:1"));
  r = run_tessel(model + " --tokens 1,2 --temperature 0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("temperature"));
  r = run_tessel(model + " --tokens 1,2 --top-p 1.5");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("top_p"));
  r = run_tessel(model + " --tokens 1,2 --max-new-tokens 0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--max-new-tokens"));
  r = run_tessel(model);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--tokens"));
}

}  // namespace
