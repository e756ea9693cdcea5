// Reading a Python module as data (config/python_data.h): the subset a plan
// file is written in parses to the values Python would build, and everything
// outside it is refused with file, line and column.
#include <gtest/gtest.h>

#include <string>

#include "config/python_data.h"
#include "config/temp_files.h"

namespace tessel::config {
namespace {

using test_util::usage_error_of;
using Kind = PyValue::Kind;

const PythonImports& imports() {
  static const PythonImports i = [] {
    PythonImports out;
    out.allowed["pkg.styles"] = {"Style", "Layout"};
    return out;
  }();
  return i;
}

PyModule parse(const std::string& text) { return parse_python_data(text, "plan.py", imports()); }

std::string error_of(const std::string& text) {
  return usage_error_of([&] { parse(text); });
}

TEST(PythonData, ValuesAreWhatPythonBuilds) {
  const PyModule m = parse(
      "a = 'x' \"y\"  # adjacent literals join\n"
      "b = -3; c = +7\n"
      "d = (None, True, False)\n"
      "e = [1, 2,]\n"
      "f = {'k': (1,), \"j\": ()}\n"
      "g = (5)\n"
      "h = r'a\\nb'\n"
      "i = '\\x41\\u00e9\\n'\n"
      "j = '''two\n"
      "lines'''\n"
      "k = \\\n"
      "    1\n");
  EXPECT_EQ(m.find("a")->value.text, "xy");
  EXPECT_EQ(m.find("b")->value.integer, -3);
  EXPECT_EQ(m.find("c")->value.integer, 7);
  const PyValue& d = m.find("d")->value;
  ASSERT_TRUE(d.is(Kind::Tuple));
  ASSERT_EQ(d.items.size(), 3u);
  EXPECT_TRUE(d.items[0].is(Kind::None));
  EXPECT_TRUE(d.items[1].boolean);
  EXPECT_FALSE(d.items[2].boolean);
  EXPECT_TRUE(m.find("e")->value.is(Kind::List));
  EXPECT_EQ(m.find("e")->value.items.size(), 2u);
  const PyValue& f = m.find("f")->value;
  ASSERT_EQ(f.entries.size(), 2u);
  EXPECT_EQ(f.entries[0].key.text, "k");
  EXPECT_TRUE(f.entries[0].value.is(Kind::Tuple));
  EXPECT_EQ(f.entries[0].value.items.size(), 1u);
  EXPECT_TRUE(f.entries[1].value.is(Kind::Tuple));
  EXPECT_TRUE(f.entries[1].value.items.empty());
  EXPECT_TRUE(m.find("g")->value.is(Kind::Int)) << "(5) is 5, not a tuple";
  EXPECT_EQ(m.find("h")->value.text, "a\\nb");
  EXPECT_EQ(m.find("i")->value.text, "A\xC3\xA9\n");
  EXPECT_EQ(m.find("j")->value.text, "two\nlines");
  EXPECT_EQ(m.find("k")->value.integer, 1);
  EXPECT_EQ(m.find("k")->pos.line, 11);
  EXPECT_EQ(m.find("k")->value.pos.line, 12) << "a value after a joined line keeps its own line";
}

TEST(PythonData, ImportsCallsAliasesAnnotationsAndDocstrings) {
  const PyModule m = parse(
      "\"\"\"Module docstring.\"\"\"\n"
      "from __future__ import annotations\n"
      "from pkg.styles import (\n"
      "    Style,\n"
      "    Layout as L,  # aliased\n"
      ")\n"
      "\n"
      "plan: dict[str, Style] = {\n"
      "    \"a.*.b\": Style(\n"
      "        L(-1),\n"
      "        key=L(),\n"
      "        flag=False,\n"
      "    ),\n"
      "}\n"
      "'''a docstring between plans'''\n"
      "base = {\"x\": Style()}\n"
      "more = {**base, \"y\": Style()}\n"
      "copy = base\n");
  EXPECT_EQ(m.names(), (std::vector<std::string>{"plan", "base", "more", "copy"}));
  const PyValue& call = m.find("plan")->value.entries.at(0).value;
  ASSERT_TRUE(call.is(Kind::Call));
  EXPECT_EQ(call.text, "Style");
  EXPECT_EQ(call.pos.line, 9);
  EXPECT_EQ(call.pos.column, 14);
  ASSERT_EQ(call.items.size(), 1u);
  EXPECT_EQ(call.items[0].text, "Layout") << "an alias resolves to the imported name";
  EXPECT_EQ(call.items[0].spelled, "L");
  EXPECT_EQ(call.items[0].items.at(0).integer, -1);
  ASSERT_EQ(call.keywords.size(), 2u);
  EXPECT_EQ(call.keywords[0].name, "key");
  EXPECT_EQ(call.keywords[1].value.boolean, false);
  const PyValue& more = m.find("more")->value;
  ASSERT_EQ(more.entries.size(), 2u);
  EXPECT_EQ(more.entries[0].key.text, "x");
  EXPECT_EQ(m.find("copy")->value.entries.size(), 1u);
}

TEST(PythonData, RefusesCodeWithLineAndColumn) {
  struct Case {
    const char* source;
    const char* where;
    const char* what;
  };
  const Case cases[] = {
      {"import os\n", "plan.py:1:1:", "'import <module>' is not supported"},
      {"from os import path\n", "plan.py:1:6:", "importing from 'os' is not supported"},
      {"from pkg.styles import Other\n", "plan.py:1:24:", "'Other' cannot be imported"},
      {"from pkg.styles import *\n", "plan.py:1:24:", "'import *'"},
      {"from . import x\n", "plan.py:1:6:", "relative imports"},
      {"def f():\n    return 1\n", "plan.py:1:1:", "'def' is code"},
      {"class A:\n    pass\n", "plan.py:1:1:", "'class' is code"},
      {"x = 1\n  y = 2\n", "plan.py:2:3:", "unexpected indent"},
      {"x = open('f')\n", "plan.py:1:5:", "'open' is not imported"},
      {"from pkg.styles import Style\nx = Style().x\n", "plan.py:2:12:", "attribute access"},
      {"x = {'a': 1}['a']\n", "plan.py:1:13:", "subscripts"},
      {"x = 1 + 2\n", "plan.py:1:7:", "operator '+'"},
      {"x = [1 for i in 'ab']\n", "plan.py:1:8:", "comprehensions"},
      {"x = lambda: 1\n", "plan.py:1:5:", "'lambda' is code"},
      {"x = f'{y}'\n", "plan.py:1:5:", "f-strings"},
      {"x = 1.5\n", "plan.py:1:5:", "only decimal integers"},
      {"x = {'a' 1}\n", "plan.py:1:10:", "without ':'"},
      {"x = {'a': 1\n", "plan.py:1:5:", "'{' is never closed"},
      {"x = 'abc\n", "plan.py:1:5:", "not closed on its line"},
      {"x = (1]\n", "plan.py:1:7:", "does not match"},
      {"x = y\n", "plan.py:1:5:", "'y' is not defined"},
      {"from pkg.styles import Style\nx = Style\n", "plan.py:2:5:", "write Style()"},
      {"from pkg.styles import Style\nx = Style(*a)\n", "plan.py:2:11:", "'*' and '**' arguments"},
      {"from pkg.styles import Style\nx = Style(a=1, a=2)\n", "plan.py:2:16:", "repeated"},
      {"from pkg.styles import Style\nx = Style(a=1, 2)\n", "plan.py:2:16:", "positional argument after keyword"},
      {"x = y = {}\n", "plan.py:1:7:", "chained assignment"},
      {"x = {1, 2}\n", "plan.py:1:7:", "a set"},
      {"x = 99999999999999999999\n", "plan.py:1:5:", "out of range"},
      {"x = 1 @\n", "plan.py:1:7:", "operator '@'"},
      {"print('hi')\n", "plan.py:1:1:", "module-level expression"},
      {"if True:\n    x = 1\n", "plan.py:1:1:", "'if' is code"},
      {"x = 1 $\n", "plan.py:1:7:", "unexpected character '$'"},
      {"x = 'a'.join([])\n", "plan.py:1:8:", "attribute access"},
  };
  for (const auto& c : cases) {
    const std::string msg = error_of(c.source);
    EXPECT_NE(msg.find(c.where), std::string::npos) << c.source << " -> " << msg;
    EXPECT_NE(msg.find(c.what), std::string::npos) << c.source << " -> " << msg;
  }
}

TEST(PythonData, DeepNestingIsRefusedNotACrash) {
  std::string deep = "x = " + std::string(5000, '[') + std::string(5000, ']') + "\n";
  EXPECT_NE(error_of(deep).find("nested more than"), std::string::npos);
}

}  // namespace
}  // namespace tessel::config
