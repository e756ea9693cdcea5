// Command-line overrides: every form, every value type, every error.
#include "config/overrides.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "config/flow_value.h"
#include "config/loader.h"
#include "temp_files.h"

namespace tessel::config {
namespace {

using ::testing::HasSubstr;
using test_util::usage_error_of;

Config base() {
  return parse_yaml(R"(
policy:
  model_name: tiny
  dtensor_cfg:
    tensor_parallel_size: 1
    custom_parallel_plan: null
  optimizer:
    kwargs: {lr: 1.0e-5, betas: [0.9, 0.98]}
data:
  train: [{name: a}, {name: b}]
)");
}

TEST(FlowValue, Types) {
  struct Case {
    const char* text;
    Config expected;
  };
  const Case cases[] = {
      {"4", Config(4)},
      {"-4", Config(-4)},
      {"2.5", Config(2.5)},
      {"1e-5", Config(1e-5)},
      {"true", Config(true)},
      {"False", Config(false)},
      {"null", Config::null()},
      {"abc", Config("abc")},
      {"  spaced words  ", Config("spaced words")},
      {"", Config("")},
      {"'4'", Config("4")},
      {"\"null\"", Config("null")},
      {"'it''s'", Config("it's")},
      {"\"say \\\"hi\\\"\"", Config("say \"hi\"")},
      {"a,b:c", Config("a,b:c")},  // top-level bare text keeps commas and colons
      {"[]", Config::list()},
      {"[1, 2.5, x, 'y', null]",
       Config::list({Config(1), Config(2.5), Config("x"), Config("y"), Config::null()})},
      {"[[1], []]", Config::list({Config::list({Config(1)}), Config::list()})},
      {"{}", Config::map()},
      {"${a.b}", Config("${a.b}")},
      {"[${a.b}, ${oc.env:X,1}]", Config::list({Config("${a.b}"), Config("${oc.env:X,1}")})},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(parse_flow_value(c.text), c.expected) << c.text;
  }
  Config dict = parse_flow_value("{k: v, n: 1, nested: {l: [1, 2]}, 'model.layers.*.q': colwise}");
  EXPECT_EQ(dict, parse_yaml("{k: v, n: 1, nested: {l: [1, 2]}, 'model.layers.*.q': colwise}"));
  EXPECT_EQ(dict.keys().back(), "model.layers.*.q");
}

TEST(FlowValue, Errors) {
  const char* bad[] = {"[1, 2", "{a 1}", "{a: 1", "'open", "[1,,2]", "[1] x", "{a: 1, a: 2}",
                       "[${a.b]"};
  for (const char* text : bad) {
    EXPECT_THAT(usage_error_of([&] { parse_flow_value(text); }), HasSubstr("cannot parse value"))
        << text;
  }
}

TEST(Overrides, EveryForm) {
  Config c = base();
  apply_overrides(c, {
                         "policy.model_name=big",
                         "policy.dtensor_cfg.tensor_parallel_size=4",
                         "policy.optimizer.kwargs.betas=[0.8,0.9]",
                         "policy.dtensor_cfg.custom_parallel_plan={lm_head: colwise_rep}",
                         "+policy.new_key=hello",
                         "+policy.deep.new.key=1",
                         "++policy.model_name=bigger",
                         "++policy.forced=true",
                         "~policy.optimizer.kwargs.lr",
                         "data.train.1.name=c",
                         "~data.train.0",
                     });
  EXPECT_EQ(c.get<std::string>("policy.model_name"), "bigger");
  EXPECT_EQ(c.get<int>("policy.dtensor_cfg.tensor_parallel_size"), 4);
  EXPECT_EQ(c.get<std::vector<double>>("policy.optimizer.kwargs.betas"),
            (std::vector<double>{0.8, 0.9}));
  EXPECT_EQ(c.at("policy.dtensor_cfg.custom_parallel_plan"), parse_yaml("lm_head: colwise_rep"));
  EXPECT_EQ(c.get<std::string>("policy.new_key"), "hello");
  EXPECT_EQ(c.get<int>("policy.deep.new.key"), 1);
  EXPECT_TRUE(c.get<bool>("policy.forced"));
  EXPECT_FALSE(c.has("policy.optimizer.kwargs.lr"));
  EXPECT_EQ(c.at("data.train"), parse_yaml("[{name: c}]"));
}

TEST(Overrides, ValueKeepsTypeOrReplacesType) {
  Config c = base();
  apply_overrides(c, {"policy.model_name='8'", "policy.dtensor_cfg.custom_parallel_plan=null"});
  EXPECT_EQ(c.at("policy.model_name"), Config("8"));
  EXPECT_TRUE(c.at("policy.dtensor_cfg.custom_parallel_plan").is_null());
  apply_overrides(c, {"policy.dtensor_cfg.custom_parallel_plan=a.b.c"});
  EXPECT_EQ(c.get<std::string>("policy.dtensor_cfg.custom_parallel_plan"), "a.b.c");
  apply_overrides(c, {"~policy.dtensor_cfg.tensor_parallel_size=1"});  // matches: deleted
  EXPECT_FALSE(c.has("policy.dtensor_cfg.tensor_parallel_size"));
}

TEST(Overrides, UnknownKeySuggestsClosestAndPlusForm) {
  Config c = parse_yaml(R"(
policy:
  dtensor_cfg: {tensor_parallel_size: 1, context_parallel_size: 1, sequence_parallel: false}
  model_name: x
)");
  std::string m = usage_error_of(
      [&] { apply_overrides(c, {"policy.dtensor_cfg.tensor_paralel_size=4"}); });
  EXPECT_THAT(m, HasSubstr("unknown key 'policy.dtensor_cfg.tensor_paralel_size'. Did you mean "
                           "'policy.dtensor_cfg.tensor_parallel_size'? To add a new key use "
                           "'+policy.dtensor_cfg.tensor_paralel_size=4'"));
  // A typo in a middle segment.
  m = usage_error_of([&] { apply_overrides(c, {"policy.dtensr_cfg.tensor_parallel_size=2"}); });
  EXPECT_THAT(m, HasSubstr("Did you mean 'policy.dtensor_cfg.tensor_parallel_size'?"));
  // A missing prefix.
  m = usage_error_of([&] { apply_overrides(c, {"sequence_parallel=true"}); });
  EXPECT_THAT(m, HasSubstr("Did you mean 'policy.dtensor_cfg.sequence_parallel'?"));
  EXPECT_THAT(m, HasSubstr("'+sequence_parallel=true'"));
  // Nothing close: no suggestion, still the + form.
  m = usage_error_of([&] { apply_overrides(c, {"zzz.qqq=1"}); });
  EXPECT_THAT(m, ::testing::Not(HasSubstr("Did you mean")));
  EXPECT_THAT(m, HasSubstr("To add a new key use '+zzz.qqq=1'"));
  // The config is unchanged by a failed override.
  EXPECT_FALSE(c.has("zzz"));
}

TEST(Overrides, Errors) {
  struct Case {
    std::string override_;
    std::string fragment;
  };
  const Case cases[] = {
      {"+policy.model_name=x",
       "key 'policy.model_name' already exists (value 'tiny'). To change it use "
       "'policy.model_name=x'"},
      {"~policy.modle_name", "cannot delete 'policy.modle_name': no such key. Did you mean "
                             "'policy.model_name'?"},
      {"~policy.model_name=other", "'policy.model_name' is 'tiny', not 'other'; nothing deleted"},
      {"policy.model_name", "has no '=VALUE'"},
      {"=3", "has no key"},
      {"", "empty override"},
      {"policy..x=1", "empty segment"},
      {"policy.model_name=[1,", "cannot parse value '[1,'"},
      {"+policy.model_name.x=1", "cannot add below 'policy.model_name', which is a string"},
      {"+data.train.2=x", "'data.train' is a list of 2 items"},
      {"data.train.2.name=x", "unknown key 'data.train.2.name'"},
  };
  for (const auto& k : cases) {
    Config c = base();
    EXPECT_THAT(usage_error_of([&] { apply_overrides(c, {k.override_}); }), HasSubstr(k.fragment))
        << k.override_;
    EXPECT_EQ(c, base()) << k.override_;
  }
}

TEST(Overrides, ParseRecordsParts) {
  Override o = parse_override("++a.b = [1, 2] ");
  EXPECT_EQ(o.op, Override::Op::ForceSet);
  EXPECT_EQ(o.key, "a.b");
  EXPECT_EQ(o.value_text, "[1, 2]");
  EXPECT_EQ(*o.value, Config::list({Config(1), Config(2)}));
  Override d = parse_override("~a");
  EXPECT_EQ(d.op, Override::Op::Delete);
  EXPECT_FALSE(d.value.has_value());
  Override eq = parse_override("url=http://x/?a=b");  // value may contain '='
  EXPECT_EQ(eq.value->as_string(), "http://x/?a=b");
}

}  // namespace
}  // namespace tessel::config
