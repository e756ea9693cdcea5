// Custom plans as Python modules of ParallelStyle objects (python_plan.h):
// the example file's plans map onto tessel's styles with torch's defaults and
// semantics, the dotted-path resolver finds .py files (and says which file
// wins over a YAML one), and every way out of the supported subset is an
// error naming the file, line and column.
#include <gtest/gtest.h>

#include <string>

#include "config/parallelism_config.h"
#include "config/temp_files.h"
#include "core/error.h"
#include "parallel/custom_plan.h"
#include "parallel/python_plan.h"
#include "parallel/style.h"
#include "support/source_tree.h"
#include "support/temp_dir.h"

namespace tessel::parallel {
namespace {

using config::test_util::usage_error_of;
using test_support::TempDir;

const char* const kImports =
    "from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, SequenceParallel, "
    "PrepareModuleInput, PrepareModuleOutput\n"
    "from torch.distributed.tensor.placement_types import Replicate, Shard, Partial\n";

// pattern -> describe() of its style (or the HF string) for a plan.
std::map<std::string, std::string> described(const Plan& plan) {
  std::map<std::string, std::string> out;
  for (const auto& e : plan.entries) out[e.pattern] = e.style ? e.style->describe() : "string:" + e.style_string;
  return out;
}

Plan plan_of(const std::string& body, const std::string& name = "plan") {
  const auto module = config::parse_python_data(std::string(kImports) + body, "plan.py", plan_file_imports());
  EXPECT_NE(module.find(name), nullptr);
  return plan_from_python(module, name);
}

std::string error_of(const std::string& body) {
  return usage_error_of([&] { plan_of(body); });
}

TEST(PythonPlan, ExamplePlansMapWithTorchDefaults) {
  const auto module =
      read_python_plan_file(test_support::source_tree() / "examples/custom_parallel/custom_parallel.py");
  EXPECT_EQ(module.names(), (std::vector<std::string>{"custom_parallel_plan", "gathered_output_projections",
                                                      "sequence_parallel_plan"}));

  auto plain = described(plan_from_python(module, "custom_parallel_plan"));
  EXPECT_EQ(plain.size(), 9u);
  EXPECT_EQ(plain["model.embed_tokens"], "RowwiseParallel(input=Replicate, output=Replicate)");
  EXPECT_EQ(plain["model.layers.*.self_attn.q_proj"], "ColwiseParallel(input=Replicate, output=Shard(-1))");
  EXPECT_EQ(plain["model.layers.*.mlp.down_proj"], "RowwiseParallel(input=Shard(-1), output=Replicate)");
  EXPECT_EQ(plain["lm_head"], "ColwiseParallel(input=Replicate, output=Shard(-1), distributed output)");

  auto gathered = described(plan_from_python(module, "gathered_output_projections"));
  EXPECT_EQ(gathered["model.layers.*.self_attn.o_proj"], "ColwiseParallel(input=Shard(-1), output=Replicate)");
  EXPECT_EQ(gathered["model.layers.*.mlp.down_proj"], "ColwiseParallel(input=Shard(-1), output=Replicate)");

  auto sp = described(plan_from_python(module, "sequence_parallel_plan"));
  EXPECT_EQ(sp["model.embed_tokens"], "RowwiseParallel(input=Replicate, output=Shard(1))");
  EXPECT_EQ(sp["model.norm"], "SequenceParallel(sequence_dim=1)");
  // hidden_states by keyword is tessel's input 0.
  EXPECT_EQ(sp["model.layers.*.self_attn"], "PrepareModuleInput((Shard(1)) -> (Replicate), distributed)");
  EXPECT_EQ(sp["model.layers.*.mlp"], "PrepareModuleInput((Shard(1)) -> (Replicate), distributed)");
  EXPECT_EQ(sp["lm_head"], "ColwiseParallel(input=Shard(1), output=Shard(-1), distributed output)");
}

TEST(PythonPlan, LayoutsKeywordsAndStrings) {
  auto d = described(plan_of(
      "plan = {\n"
      "  'a': PrepareModuleInput(input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None),\n"
      "                          use_local_output=True),\n"
      "  'b': PrepareModuleOutput(output_layouts=Partial(), desired_output_layouts=Shard(dim=0)),\n"
      "  'c': PrepareModuleInput(input_kwarg_layouts={'hidden_states': Shard(1), 'position_embeddings': None},\n"
      "                          desired_input_kwarg_layouts={'hidden_states': Replicate(),\n"
      "                                                       'position_embeddings': None}),\n"
      "  'd': 'colwise_rep',\n"
      "  'e': SequenceParallel(sequence_dim=0, use_local_output=True),\n"
      "  'f': RowwiseParallel(output_layouts=Partial('sum')),\n"
      "  'g': ColwiseParallel(input_layouts=None),\n"
      "}\n"));
  EXPECT_EQ(d["a"], "PrepareModuleInput((Shard(1), -) -> (Replicate, -))");
  EXPECT_EQ(d["b"], "PrepareModuleOutput((Partial) -> (Shard(0)))");
  EXPECT_EQ(d["c"], "PrepareModuleInput((Shard(1)) -> (Replicate), distributed)");
  EXPECT_EQ(d["d"], "string:colwise_rep");
  EXPECT_EQ(d["e"], "SequenceParallel(sequence_dim=0)");
  EXPECT_EQ(d["f"], "RowwiseParallel(input=Shard(-1), output=Partial)");
  EXPECT_EQ(d["g"], "ColwiseParallel(input=Replicate, output=Shard(-1))") << "None means the default";
}

TEST(PythonPlan, ErrorsNameFileLineColumnAndWhatIsSupported) {
  struct Case {
    std::string body;
    const char* where;
    const char* what;
  };
  // Line numbers count the two import lines of kImports.
  const Case cases[] = {
      // an unknown style name
      {"from torch.distributed.tensor.parallel import PrepareModuleInputOutput\n", "plan.py:3:47:",
       "'PrepareModuleInputOutput' cannot be imported"},
      {"plan = {'a': Replicate()}\n", "plan.py:3:14:", "Replicate() is a layout, not a style"},
      {"plan = {'a': Colwise()}\n", "plan.py:3:14:", "'Colwise' is not imported"},
      // an unknown keyword
      {"plan = {'a': ColwiseParallel(input_layout=Shard(1))}\n", "plan.py:3:30:",
       "ColwiseParallel has no keyword argument 'input_layout'. Did you mean 'input_layouts'"},
      {"plan = {'a': ColwiseParallel(Replicate())}\n", "plan.py:3:30:", "takes keyword arguments only"},
      // layouts a style cannot take
      {"plan = {'a': ColwiseParallel(output_layouts=Partial())}\n", "plan.py:3:45:",
       "ColwiseParallel cannot take output_layouts=Partial"},
      {"plan = {'a': RowwiseParallel(input_layouts=Partial())}\n", "plan.py:3:44:",
       "RowwiseParallel cannot take input_layouts=Partial"},
      {"plan = {'a': ColwiseParallel(input_layouts=(Shard(1),))}\n", "plan.py:3:44:", "takes one layout, not a tuple"},
      {"plan = {'a': ColwiseParallel(input_layouts=Shard('x'))}\n", "plan.py:3:50:", "must be an integer"},
      {"plan = {'a': ColwiseParallel(input_layouts=1)}\n", "plan.py:3:44:", "must be a layout"},
      {"plan = {'a': RowwiseParallel(use_local_output=1)}\n", "plan.py:3:47:", "True or False"},
      {"plan = {'a': PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=())}\n", "plan.py:3:14:",
       "1 input_layouts but 0 desired_input_layouts"},
      {"plan = {'a': PrepareModuleInput(input_kwarg_layouts={'hidden': Shard(1)},\n"
       "                                desired_input_kwarg_layouts={'hidden': Replicate()})}\n",
       "plan.py:3:54:", "no input named 'hidden'"},
      {"plan = {'a': PrepareModuleInput(input_kwarg_layouts={'position_embeddings': Shard(1)},\n"
       "                                desired_input_kwarg_layouts={'position_embeddings': Replicate()})}\n",
       "plan.py:4:62:", "replicated on every rank"},
      {"plan = {'a': PrepareModuleOutput(output_layouts=Shard(1))}\n", "plan.py:3:14:",
       "needs output_layouts and desired_output_layouts"},
      {"plan = {'a': Partial('max')}\n", "plan.py:3:14:", "is a layout, not a style"},
      {"plan = {'a': RowwiseParallel(output_layouts=Partial('max'))}\n", "plan.py:3:53:", "only sum partials"},
      {"plan = {'a': 'colwize'}\n", "plan.py:3:14:", "unknown tensor-parallel style 'colwize'"},
      {"plan = {'a': 3}\n", "plan.py:3:14:", "must be a style such as ColwiseParallel()"},
      {"plan = {'a': ColwiseParallel(), 'a': RowwiseParallel()}\n", "plan.py:3:33:", "'a' appears twice"},
      {"plan = {1: ColwiseParallel()}\n", "plan.py:3:9:", "plan keys are module patterns"},
      {"plan = {}\n", "plan.py:3:8:", "non-empty dict"},
      {"plan = ['a']\n", "plan.py:3:8:", "non-empty dict of module pattern -> style, got a list"},
      // a syntax error, with line and column
      {"plan = {\n  'a': ColwiseParallel(,),\n}\n", "plan.py:4:24:", "unexpected ','"},
      {"plan = {\n  'a': ColwiseParallel(\n}\n", "plan.py:5:1:", "'}' does not match '(' opened at line 4 column 23"},
      // beyond the data subset
      {"plan = {'a': ColwiseParallel(input_layouts=make_layout())}\n", "plan.py:3:44:", "'make_layout' is not imported"},
      {"plan = {'a': torch.distributed.ColwiseParallel()}\n", "plan.py:3:14:", "'torch' is not defined"},
      {"plan = {'a': ColwiseParallel().with_layout()}\n", "plan.py:3:31:", "attribute access"},
      {"import torch\nplan = {}\n", "plan.py:3:1:", "'import <module>' is not supported"},
      {"from os import system\n", "plan.py:3:6:", "importing from 'os' is not supported"},
      {"from torch.distributed.tensor import DTensor\n", "plan.py:3:38:", "'DTensor' cannot be imported"},
  };
  for (const auto& c : cases) {
    const std::string msg = error_of(c.body);
    EXPECT_NE(msg.find(c.where), std::string::npos) << c.body << " -> " << msg;
    EXPECT_NE(msg.find(c.what), std::string::npos) << c.body << " -> " << msg;
  }
}

CustomPlan load(const std::string& ref, const TempDir& dir) {
  return load_custom_plan(config::CustomPlanSpec{ref, std::nullopt}, (dir / "run.yaml").string());
}

TEST(PythonPlan, ResolverFindsPyFilesAndSaysWhichWins) {
  TempDir dir;
  dir.write("plans/tp.py", std::string(kImports) + "mine = {'lm_head': ColwiseParallel()}\nother = {'x': 'colwise'}\n");
  // dotted path -> plans/tp.py, name mine
  CustomPlan p = load("plans.tp.mine", dir);
  EXPECT_EQ(described(p.plan)["lm_head"], "ColwiseParallel(input=Replicate, output=Shard(-1))");
  EXPECT_NE(p.origin.find("tp.py"), std::string::npos) << p.origin;
  // file:name
  EXPECT_EQ(load("plans/tp.py:other", dir).plan.entries.at(0).style_string, "colwise");

  // A YAML file at the same path: .py wins for a name both define; a name
  // only the YAML defines comes from the YAML.
  dir.write("plans/tp.yaml", "mine:\n  lm_head: colwise_rep\nyaml_only:\n  lm_head: colwise\n");
  p = load("plans.tp.mine", dir);
  EXPECT_NE(p.origin.find("tp.yaml also defines it and is not used: .py wins"), std::string::npos) << p.origin;
  EXPECT_NE(p.plan.entries.at(0).style, nullptr);
  p = load("plans.tp.yaml_only", dir);
  EXPECT_NE(p.origin.find("tp.yaml"), std::string::npos) << p.origin;
  EXPECT_EQ(p.plan.entries.at(0).style_string, "colwise");

  // A name neither defines: each file and what it defines.
  std::string msg = usage_error_of([&] { load("plans.tp.missing", dir); });
  EXPECT_NE(msg.find("no plan file defines 'missing'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tp.py (defines: mine, other)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("tp.yaml (defines: mine, yaml_only)"), std::string::npos) << msg;
  msg = usage_error_of([&] { load("plans/tp.py:missing", dir); });
  EXPECT_NE(msg.find("has no module-level name 'missing' (it defines: mine, other)"), std::string::npos) << msg;

  // A broken .py is an error even when a YAML file could serve: silently
  // using another file than the one being edited would hide the mistake.
  dir.write("plans/tp.py", "mine = {'lm_head': ColwiseParallel(}\n");
  msg = usage_error_of([&] { load("plans.tp.yaml_only", dir); });
  EXPECT_NE(msg.find("tp.py:1:"), std::string::npos) << msg;
}

}  // namespace
}  // namespace tessel::parallel
