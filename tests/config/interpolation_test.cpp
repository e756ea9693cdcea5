// ${...} interpolation: typed, textual, chained, relative, resolvers, errors.
#include "config/interpolation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

#include "config/loader.h"
#include "temp_files.h"

namespace tessel::config {
namespace {

using ::testing::HasSubstr;
using test_util::usage_error_of;

Config resolved(const std::string& yaml) {
  Config c = parse_yaml(yaml);
  resolve_interpolations(c);
  return c;
}

TEST(Interpolation, WholeValueKeepsType) {
  Config c = resolved(R"(
a: {n: 4, f: 0.5, b: true, s: text, l: [1, 2], m: {x: 1}, z: null}
n: ${a.n}
f: ${a.f}
b: ${a.b}
s: ${a.s}
l: ${a.l}
m: ${a.m}
z: ${a.z}
)");
  EXPECT_EQ(c.at("n"), Config(4));
  EXPECT_EQ(c.at("f"), Config(0.5));
  EXPECT_EQ(c.at("b"), Config(true));
  EXPECT_EQ(c.at("s"), Config("text"));
  EXPECT_EQ(c.at("l"), Config::list({Config(1), Config(2)}));
  EXPECT_EQ(c.at("m"), parse_yaml("x: 1"));
  EXPECT_TRUE(c.at("z").is_null());
}

TEST(Interpolation, InsideStringIsText) {
  Config c = resolved(R"(
name: sft
n: 8
f: 2.0
dir: "results/${name}-${n}n/${f}"
esc: 'keep \${name} as is'
)");
  EXPECT_EQ(c.get<std::string>("dir"), "results/sft-8n/2.0");
  EXPECT_EQ(c.get<std::string>("esc"), "keep ${name} as is");
}

TEST(Interpolation, ChainedAndForwardReferences) {
  Config c = resolved(R"(
first: ${second}
second: ${third.value}
third:
  value: ${fourth}
fourth: 42
via_map: ${third}
into_interp: ${alias.value}
alias: ${third}
)");
  EXPECT_EQ(c.at("first"), Config(42));
  EXPECT_EQ(c.at("second"), Config(42));
  EXPECT_EQ(c.at("via_map"), parse_yaml("value: 42"));
  EXPECT_EQ(c.at("into_interp"), Config(42));
}

TEST(Interpolation, RelativeListsAndNestedKeys) {
  Config c = resolved(R"(
model:
  size: 3
  copy: ${.size}
  up: ${..top}
top: t
items: [10, 20]
second: ${items.1}
which: size
nested_key: ${model.${which}}
)");
  EXPECT_EQ(c.at("model.copy"), Config(3));
  EXPECT_EQ(c.at("model.up"), Config("t"));
  EXPECT_EQ(c.at("second"), Config(20));
  EXPECT_EQ(c.at("nested_key"), Config(3));
}

TEST(Interpolation, Resolvers) {
  ::setenv("TESSEL_CONFIG_TEST_VAR", "from-env", 1);
  ::unsetenv("TESSEL_CONFIG_TEST_UNSET");
  Config c = resolved(R"(
seq: 1024
mb: 2
env: ${oc.env:TESSEL_CONFIG_TEST_VAR}
env_default: ${oc.env:TESSEL_CONFIG_TEST_UNSET,fallback}
env_default_typed: ${oc.env:TESSEL_CONFIG_TEST_UNSET,4}
env_in_text: "x-${oc.env:TESSEL_CONFIG_TEST_VAR}"
tokens: ${mul:${seq}, ${mb}}
tokens_f: ${mul:${seq}, 0.5}
sum: ${add:1, 2, ${mb}}
)");
  EXPECT_EQ(c.at("env"), Config("from-env"));
  EXPECT_EQ(c.at("env_default"), Config("fallback"));
  EXPECT_EQ(c.at("env_default_typed"), Config(4));
  EXPECT_EQ(c.at("env_in_text"), Config("x-from-env"));
  EXPECT_EQ(c.at("tokens"), Config(2048));
  EXPECT_EQ(c.at("tokens_f"), Config(512.0));
  EXPECT_EQ(c.at("sum"), Config(5));
}

TEST(Interpolation, Errors) {
  ::unsetenv("TESSEL_CONFIG_TEST_UNSET");
  struct Case {
    std::string yaml;
    std::vector<std::string> fragments;
  };
  const Case cases[] = {
      {"policy:\n  model_name: x\n  tokenizer: ${policy.modl_name}",
       {"'policy.tokenizer': interpolation ${policy.modl_name} refers to 'policy.modl_name', which "
        "does not exist. Did you mean 'policy.model_name'?"}},
      {"a: ${b}\nb: ${c}\nc: ${a}", {"interpolation cycle: a -> b -> c -> a"}},
      {"a: ${a}", {"interpolation cycle: a -> a"}},
      {"m:\n  x: ${m}", {"interpolation cycle", "m.x"}},
      {"a: x${b", {"'a': unterminated interpolation"}},
      {"a: [1]\nb: x-${a}", {"'b': ${a} in 'x-${a}' is a list and cannot be part of a string"}},
      {"a: ${oc.env:TESSEL_CONFIG_TEST_UNSET}",
       {"environment variable 'TESSEL_CONFIG_TEST_UNSET' is not set", "${oc.env:TESSEL_CONFIG_TEST_UNSET,default}"}},
      {"a: ${nope:1}", {"unknown resolver 'nope'", "supported: oc.env, mul, add"}},
      {"a: ${mul:2, x}", {"needs numbers"}},
      {"a: ${...x}", {"goes above the top of the config"}},
  };
  for (const auto& k : cases) {
    std::string message = usage_error_of([&] { resolved(k.yaml); });
    for (const auto& f : k.fragments) EXPECT_THAT(message, HasSubstr(f)) << k.yaml;
  }
}

TEST(Interpolation, HasInterpolation) {
  EXPECT_TRUE(has_interpolation("a${b}"));
  EXPECT_FALSE(has_interpolation("a\\${b}"));
  EXPECT_FALSE(has_interpolation("$5 {x}"));
}

}  // namespace
}  // namespace tessel::config
