// Loading files with `defaults:` inheritance, `_override_`, and file errors.
#include "config/loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "temp_files.h"

namespace tessel::config {
namespace {

using ::testing::HasSubstr;
using test_util::TempDir;
using test_util::usage_error_of;

TEST(Loader, SingleDefaultsMergesRecursivelyAndChildWins) {
  TempDir dir;
  dir.write("base.yaml", R"(
a: 1
b: {x: 1, y: 2, list: [1, 2, 3]}
order: base
)");
  auto child = dir.write("sub/child.yaml", R"(
defaults: ../base.yaml
b: {y: 20, z: 30, list: [9]}
c: new
)");
  Config c = load_yaml_file(child);
  EXPECT_FALSE(c.has("defaults"));
  EXPECT_EQ(c.get<int>("a"), 1);
  EXPECT_EQ(c.get<int>("b.x"), 1);
  EXPECT_EQ(c.get<int>("b.y"), 20);
  EXPECT_EQ(c.get<int>("b.z"), 30);
  EXPECT_EQ(c.get<std::vector<int>>("b.list"), std::vector<int>{9});  // lists are replaced
  EXPECT_EQ(c.get<std::string>("c"), "new");
  // Keys keep the base's order; new keys come after.
  EXPECT_EQ(c.keys(), (std::vector<std::string>{"a", "b", "order", "c"}));
  EXPECT_EQ(c.sub("b").keys(), (std::vector<std::string>{"x", "y", "list", "z"}));
  EXPECT_EQ(c.source_path(), child.string());
}

TEST(Loader, ListOfDefaultsDepthFirstLaterWins) {
  TempDir dir;
  dir.write("root.yaml", "v: root\nfrom_root: 1\nshared: root\n");
  dir.write("a.yaml", "defaults: root.yaml\nv: a\nfrom_a: 1\nshared: a\n");
  dir.write("b.yaml", "v: b\nfrom_b: 1\n");
  auto top = dir.write("top.yaml", "defaults: [a.yaml, b.yaml]\nfrom_top: 1\n");
  Config c = load_yaml_file(top);
  // Order of application: root, a, b, top.
  EXPECT_EQ(c.get<std::string>("v"), "b");
  EXPECT_EQ(c.get<std::string>("shared"), "a");
  for (const char* key : {"from_root", "from_a", "from_b", "from_top"}) {
    EXPECT_EQ(c.get<int>(key), 1) << key;
  }
  auto top2 = dir.write("top2.yaml", "defaults: [b.yaml, a.yaml]\n");
  EXPECT_EQ(load_yaml_file(top2).get<std::string>("v"), "a");
}

TEST(Loader, OverrideMarkerReplacesInsteadOfMerging) {
  TempDir dir;
  dir.write("base.yaml", "opt: {name: adam, kwargs: {lr: 1, eps: 2}}\nkeep: {x: 1}\n");
  auto child = dir.write("child.yaml", R"(
defaults: base.yaml
opt:
  _override_: true
  name: sgd
  kwargs: {lr: 3}
keep:
  _override_: false
  y: 2
)");
  Config c = load_yaml_file(child);
  EXPECT_EQ(c.at("opt"), parse_yaml("{name: sgd, kwargs: {lr: 3}}"));
  EXPECT_EQ(c.at("keep"), parse_yaml("{x: 1, y: 2}"));
  // A marker with nothing below it is dropped too.
  auto lone = dir.write("lone.yaml", "s: {_override_: true, a: 1}\n");
  EXPECT_EQ(load_yaml_file(lone), parse_yaml("s: {a: 1}"));
  auto bad = dir.write("bad.yaml", "s: {_override_: yes}\n");
  EXPECT_THAT(usage_error_of([&] { load_yaml_file(bad); }),
              HasSubstr("'_override_' must be true or false"));
}

TEST(Loader, Errors) {
  TempDir dir;
  dir.write("syntax.yaml", "a: 1\nb: [1, 2\nc: 3\n");
  dir.write("includes_missing.yaml", "defaults: nowhere.yaml\n");
  dir.write("cycle_a.yaml", "defaults: cycle_b.yaml\n");
  dir.write("cycle_b.yaml", "defaults: cycle_a.yaml\n");
  dir.write("self.yaml", "defaults: [self.yaml]\n");
  dir.write("list_top.yaml", "- 1\n- 2\n");
  dir.write("bad_defaults.yaml", "defaults: {a: 1}\n");
  dir.write("dup.yaml", "a: 1\nb: 2\na: 3\n");
  // Found by fuzz/yaml_config ("!# : "): an empty key made interpolation
  // recurse until the stack overflowed ("" is the root's path).
  dir.write("empty_key.yaml", "a: 1\n!# : 2\n");
  // Found by fuzz/plan_yaml: a parent whose name the system refuses (over
  // NAME_MAX) made std::filesystem throw its own exception.
  const std::string long_name = std::string(300, 'n') + ".yaml";
  dir.write("long_parent.yaml", "defaults: " + long_name + "\n");
  struct Case {
    std::string file;
    std::vector<std::string> fragments;
  };
  auto p = [&](const std::string& name) { return (dir.path() / name).string(); };
  const Case cases[] = {
      {"missing.yaml", {"config file not found: '" + p("missing.yaml") + "'"}},
      {"syntax.yaml", {p("syntax.yaml") + ":", "YAML syntax error"}},
      {"includes_missing.yaml",
       {"nowhere.yaml", "listed in 'defaults:' of '" + p("includes_missing.yaml") + "'"}},
      {"cycle_a.yaml", {"inheritance cycle", "cycle_a.yaml -> ", "cycle_b.yaml -> ", "cycle_a.yaml"}},
      {"self.yaml", {"inheritance cycle", "self.yaml -> ", "self.yaml"}},
      {"list_top.yaml", {"top level of a config file must be a mapping"}},
      {"bad_defaults.yaml", {"'defaults' must be a file name or a list of file names"}},
      {"dup.yaml", {p("dup.yaml") + ":3: duplicate key 'a'"}},
      {"empty_key.yaml", {p("empty_key.yaml") + ":2: empty mapping key"}},
      {"long_parent.yaml",
       {"config file not found: '" + p(long_name) + "' (File name too long)",
        "listed in 'defaults:' of '" + p("long_parent.yaml") + "'"}},
  };
  for (const auto& c : cases) {
    std::string message = usage_error_of([&] { load_yaml_file(dir.path() / c.file); });
    for (const auto& f : c.fragments) EXPECT_THAT(message, HasSubstr(f)) << c.file;
  }
}

TEST(Loader, SyntaxErrorNamesLine) {
  std::string message = usage_error_of([] { parse_yaml("a: 1\nb: [1, 2\nc: 3\n", "f.yaml"); });
  // The unclosed list is detected when the next line starts.
  EXPECT_THAT(message, ::testing::MatchesRegex("f\\.yaml:[23]:[0-9]+: YAML syntax error: .*"));
}

TEST(Loader, QuotingDecidesType) {
  Config c = parse_yaml(R"(
i: 1
s: '1'
d: "1"
b: |
  text
t: !!str 5
n:
)");
  EXPECT_EQ(c.at("i").kind(), Kind::Int);
  EXPECT_EQ(c.at("s").kind(), Kind::String);
  EXPECT_EQ(c.at("d").kind(), Kind::String);
  EXPECT_EQ(c.get<std::string>("b"), "text\n");
  EXPECT_EQ(c.at("t").kind(), Kind::String);
  EXPECT_TRUE(c.at("n").is_null());
  EXPECT_EQ(parse_yaml(""), Config::map());
}

TEST(Loader, LoadConfigAppliesOverridesBeforeInterpolation) {
  TempDir dir;
  auto f = dir.write("c.yaml", "model: small\ntokenizer: ${model}\n");
  Config c = load_config(f, {"model=large"});
  EXPECT_EQ(c.get<std::string>("tokenizer"), "large");
  EXPECT_EQ(c.source_path(), f.string());
}

}  // namespace
}  // namespace tessel::config
