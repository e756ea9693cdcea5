// `tessel logprobs` end to end (the built binary through popen): the printed
// log-probs equal Hugging Face transformers' float64 ones
// (tests/golden/<case>/logprobs.json) within 1e-5, for one sequence
// (--tokens), for a batch of sequences of different lengths (--input) at a
// temperature, and on two processes under tensor parallelism (vocab-parallel
// log-probs over a vocabulary of 97 that does not divide by 2) and context
// parallelism; bad input exits 2 naming the line or the value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
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

json golden_logprobs(const std::string& name) {
  std::ifstream in(golden_dir(name) / "logprobs.json");
  return json::parse(in);
}

// The golden rows cut to their lengths, one {"tokens": [...]} line each.
std::string input_lines(const json& g) {
  std::string out;
  for (size_t b = 0; b < g["input_ids"].size(); ++b) {
    const auto ids = g["input_ids"][b].get<std::vector<int64_t>>();
    const auto n = g["input_lengths"][b].get<size_t>();
    out += json{{"tokens", std::vector<int64_t>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n))}}.dump() + "\n";
  }
  return out;
}

// Each printed line's log-probs against the golden table `t` (row b = line b).
void expect_rows_match(const std::string& stdout_text, const json& g, size_t t) {
  std::istringstream lines(stdout_text);
  std::string line;
  size_t b = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line.front() != '{') continue;
    const auto got = json::parse(line)["logprobs"].get<std::vector<double>>();
    const auto want = g["logprobs"][t][b].get<std::vector<double>>();
    ASSERT_EQ(got.size(), g["input_lengths"][b].get<size_t>()) << "row " << b;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "row " << b << " position " << i;
    ++b;
  }
  EXPECT_EQ(b, g["input_ids"].size()) << stdout_text;
}

TEST(LogprobsCli, OneSequenceMatchesTransformers) {
  const json g = golden_logprobs("llama");
  const auto ids = g["input_ids"][0].get<std::vector<int64_t>>();
  std::string tokens;
  for (int64_t id : ids) tokens += (tokens.empty() ? "" : ",") + std::to_string(id);
  const Result r = run_tessel("logprobs '" + golden_dir("llama").string() + "' --tokens " + tokens + " --json", false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json out = json::parse(r.output);
  const auto got = out["logprobs"].get<std::vector<double>>();
  const auto want = g["logprobs"][0][0].get<std::vector<double>>();
  ASSERT_EQ(got.size(), want.size());
  double sum = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5) << "position " << i;
    sum += want[i];
  }
  EXPECT_EQ(got[0], 0.0);
  EXPECT_NEAR(out["sum"].get<double>(), sum, 1e-4);
}

TEST(LogprobsCli, BatchAtATemperatureOnOneProcessAndOnTwo) {
  TempDir dir;
  for (const char* name : {"llama", "qwen2"}) {
    SCOPED_TRACE(name);
    const json g = golden_logprobs(name);
    const auto input = dir.write(std::string(name) + ".jsonl", input_lines(g));
    const std::string base = "logprobs '" + golden_dir(name).string() + "' --input '" + input.string() + "' --json";
    const Result one = run_tessel(base + " --temperature 0.6", false);
    ASSERT_EQ(one.exit_code, 0) << one.output;
    expect_rows_match(one.output, g, 1);
    const Result tp = run_tessel(base + " --temperature 0.6 --nproc 2 policy.dtensor_cfg.tensor_parallel_size=2", false);
    ASSERT_EQ(tp.exit_code, 0) << tp.output;
    expect_rows_match(tp.output, g, 1);
    const Result cp = run_tessel(base + " --nproc 2 policy.dtensor_cfg.context_parallel_size=2", false);
    ASSERT_EQ(cp.exit_code, 0) << cp.output;
    expect_rows_match(cp.output, g, 0);
  }
}

TEST(LogprobsCli, BadInputNamesTheLineOrValue) {
  TempDir dir;
  const std::string model = "'" + golden_dir("llama").string() + "'";
  const auto bad_id = dir.write("bad_id.jsonl", "{\"tokens\": [1, 2]}\n{\"tokens\": [1, 500]}\n");
  Result r = run_tessel("logprobs " + model + " --input '" + bad_id.string() + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("bad_id.jsonl:2"));
  EXPECT_THAT(r.output, HasSubstr("token id 500"));
  const auto no_tokens = dir.write("no_tokens.jsonl", "{\"ids\": [1, 2]}\n");
  r = run_tessel("logprobs " + model + " --input '" + no_tokens.string() + "'");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("no_tokens.jsonl:1"));
  r = run_tessel("logprobs " + model + " --tokens 1,2 --temperature 0");
  EXPECT_NE(r.exit_code, 0) << r.output;
  r = run_tessel("logprobs " + model);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--tokens"));
}

}  // namespace
