// Config value type: typed access, paths into lists, set/erase, value
// semantics, printing that reads back equal.
#include "config/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "config/loader.h"
#include "config/scalar.h"
#include "temp_files.h"

namespace tessel::config {
namespace {

using ::testing::HasSubstr;
using test_util::usage_error_of;

Config sample() {
  return parse_yaml(R"(
policy:
  train_micro_batch_size: abc
  train_global_batch_size: 32
  lr: 5.0e-6
  eps: 1e-5
  ratio: 2.0
  name: "7"
  plain_number_name: 7
  flag: True
  nothing: null
  empty:
  betas: [0.9, 0.98]
  layers:
    - {name: a, size: 1}
    - {name: b, size: 2}
)");
}

TEST(Scalar, PlainScalarTyping) {
  struct Case {
    const char* text;
    Kind kind;
  };
  const Case cases[] = {
      {"1", Kind::Int},       {"-12", Kind::Int},        {"+3", Kind::Int},
      {"1_000", Kind::Int},   {"0x1F", Kind::Int},       {"1.5", Kind::Float},
      {"5.0e-6", Kind::Float}, {"1e-5", Kind::Float},    {".5", Kind::Float},
      {"1.", Kind::Float},    {".inf", Kind::Float},     {"-.inf", Kind::Float},
      {".nan", Kind::Float},  {"true", Kind::Bool},      {"False", Kind::Bool},
      {"TRUE", Kind::Bool},   {"null", Kind::Null},      {"~", Kind::Null},
      {"yes", Kind::String},  {"1.2.3", Kind::String},   {"abc", Kind::String},
      {"e5", Kind::String},   {".", Kind::String},       {"-", Kind::String},
      {"99999999999999999999", Kind::String},  // out of int64 range: kept as text
  };
  for (const auto& c : cases) {
    EXPECT_EQ(resolve_plain_scalar(c.text).kind(), c.kind) << c.text;
  }
  EXPECT_EQ(resolve_plain_scalar("0x1F").as_int(), 31);
  EXPECT_EQ(resolve_plain_scalar("1_000").as_int(), 1000);
  EXPECT_EQ(resolve_plain_scalar("-12").as_int(), -12);
  EXPECT_DOUBLE_EQ(resolve_plain_scalar("1e-5").as_float(), 0.00001);
  EXPECT_DOUBLE_EQ(resolve_plain_scalar("5.0e-6").as_float(), 0.000005);
  EXPECT_TRUE(std::isinf(resolve_plain_scalar("-.inf").as_float()));
}

TEST(Config, TypedGet) {
  Config c = sample();
  EXPECT_EQ(c.get<int>("policy.train_global_batch_size"), 32);
  EXPECT_EQ(c.get<int64_t>("policy.train_global_batch_size"), 32);
  EXPECT_DOUBLE_EQ(c.get<double>("policy.lr"), 0.000005);
  EXPECT_DOUBLE_EQ(c.get<double>("policy.eps"), 0.00001);
  EXPECT_DOUBLE_EQ(c.get<double>("policy.train_global_batch_size"), 32.0);  // int -> double
  EXPECT_EQ(c.get<int>("policy.ratio"), 2);  // whole float -> int
  EXPECT_EQ(c.get<std::string>("policy.name"), "7");
  EXPECT_EQ(c.get<std::string>("policy.plain_number_name"), "7");
  EXPECT_TRUE(c.get<bool>("policy.flag"));
  EXPECT_EQ(c.get<std::optional<int>>("policy.nothing"), std::nullopt);
  EXPECT_TRUE(c.at("policy.empty").is_null());
  EXPECT_EQ(c.get<std::vector<double>>("policy.betas"), (std::vector<double>{0.9, 0.98}));
  EXPECT_EQ(c.get<std::string>("policy.layers.1.name"), "b");
  EXPECT_EQ(c.get<int>("policy.layers.0.size"), 1);
  EXPECT_EQ(c.at("policy.name").kind(), Kind::String);
  EXPECT_EQ(c.at("policy.plain_number_name").kind(), Kind::Int);
}

TEST(Config, TypedGetErrors) {
  Config c = sample();
  struct Case {
    std::function<void()> read;
    std::string message;
  };
  const Case cases[] = {
      {[&] { c.get<int>("policy.train_micro_batch_size"); },
       "policy.train_micro_batch_size: expected an integer, got 'abc'"},
      {[&] { c.get<int>("policy.lr"); }, "policy.lr: expected an integer, got 5e-06"},
      {[&] { c.get<bool>("policy.train_global_batch_size"); },
       "policy.train_global_batch_size: expected a boolean (true/false), got 32"},
      {[&] { c.get<double>("policy.name"); }, "policy.name: expected a number, got '7'"},
      {[&] { c.get<std::string>("policy.betas"); },
       "policy.betas: expected a string, got a list [0.9, 0.98]"},
      {[&] { c.get<std::string>("policy.nothing"); }, "policy.nothing: expected a string, got null"},
      {[&] { c.get<std::vector<int>>("policy.betas"); },
       "policy.betas.0: expected an integer, got 0.9"},
      {[&] { c.get<int>("policy.train_global_batch_sise"); },
       "missing config key 'policy.train_global_batch_sise'. Did you mean "
       "'policy.train_global_batch_size'?"},
      {[&] { c.get<int>("policy.layers.5.size"); }, "missing config key 'policy.layers.5.size'"},
      {[&] { c.sub("policy.lr"); }, "policy.lr: expected a mapping, got 5e-06"},
      {[&] { c.get<int>("policy..lr"); }, "empty segment"},
  };
  for (const auto& k : cases) {
    EXPECT_THAT(usage_error_of(k.read), HasSubstr(k.message));
  }
}

TEST(Config, GetOrUsesFallbackOnlyWhenMissing) {
  Config c = sample();
  EXPECT_EQ(c.get_or<int>("policy.missing", 7), 7);
  EXPECT_EQ(c.get_or<int>("policy.train_global_batch_size", 7), 32);
  EXPECT_THAT(usage_error_of([&] { c.get_or<int>("policy.train_micro_batch_size", 7); }),
              HasSubstr("expected an integer, got 'abc'"));
}

TEST(Config, HasSubKeysAndIteration) {
  Config c = sample();
  EXPECT_TRUE(c.has("policy.layers.1"));
  EXPECT_FALSE(c.has("policy.layers.2"));
  EXPECT_FALSE(c.has("policy.lr.x"));
  Config p = c.sub("policy");
  EXPECT_EQ(p.keys().front(), "train_micro_batch_size");
  EXPECT_EQ(p.keys().back(), "layers");
  EXPECT_EQ(p.size(), 12u);
  std::vector<std::string> names;
  for (const auto& item : c.at("policy.layers").items()) names.push_back(item.get<std::string>("name"));
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b"}));
}

TEST(Config, ValueSemantics) {
  Config a = sample();
  Config b = a;
  Config sub = a.sub("policy");
  b.set("policy.train_global_batch_size", 64);
  a.set("policy.flag", false);
  EXPECT_EQ(a.get<int>("policy.train_global_batch_size"), 32);
  EXPECT_EQ(b.get<int>("policy.train_global_batch_size"), 64);
  EXPECT_TRUE(b.get<bool>("policy.flag"));
  EXPECT_TRUE(sub.get<bool>("flag"));
}

TEST(Config, SetAndErase) {
  Config c;
  c.set("a.b.c", 1);  // intermediate mappings are created
  c.set("a.list", Config::list({Config(1), Config(2), Config(3)}));
  c.set("a.list.1", "two");
  EXPECT_EQ(c.get<int>("a.b.c"), 1);
  EXPECT_EQ(c.get<std::string>("a.list.1"), "two");
  EXPECT_THAT(usage_error_of([&] { c.set("a.list.3", 4); }), HasSubstr("list of 3 items"));
  EXPECT_THAT(usage_error_of([&] { c.set("a.b.c.d", 4); }),
              HasSubstr("'a.b.c' is an integer (1), not a mapping"));
  EXPECT_TRUE(c.erase("a.list.0"));
  EXPECT_EQ(c.at("a.list").size(), 2u);
  EXPECT_EQ(c.get<std::string>("a.list.0"), "two");
  EXPECT_TRUE(c.erase("a.b"));
  EXPECT_FALSE(c.has("a.b"));
  EXPECT_FALSE(c.erase("a.b"));
  EXPECT_FALSE(c.erase("x.y"));
}

TEST(Config, ToYamlRoundTrips) {
  Config c = sample();
  c.set("policy.quoted_true", "true");
  c.set("policy.quoted_num", "1e-5");
  c.set("policy.empty_string", "");
  c.set("policy.whole_float", 3.0);
  c.set("policy.special", "a: b # c");
  c.set("policy.empty_map", Config::map());
  c.set("policy.empty_list", Config::list());
  std::string text = c.to_yaml();
  EXPECT_THAT(text, HasSubstr("betas: [0.9, 0.98]"));
  EXPECT_THAT(text, HasSubstr("nothing: null"));
  Config back = parse_yaml(text);
  EXPECT_EQ(back, c) << text;
  EXPECT_EQ(back.at("policy.quoted_true").kind(), Kind::String);
  EXPECT_EQ(back.at("policy.whole_float").kind(), Kind::Float);
}

TEST(Config, Flow) {
  Config c = parse_yaml("a: {x: [1, 'it''s', null], y: 2.5}");
  EXPECT_EQ(c.at("a").to_flow(), "{x: [1, 'it''s', null], y: 2.5}");
}

}  // namespace
}  // namespace tessel::config
