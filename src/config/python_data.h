// Reading a Python module as data, never running it. A file in the
// reference's plan format (examples/custom_parallel/custom_parallel.py) is a
// Python module of imports and module-level `name = {...}` assignments; this
// parser accepts exactly that subset and refuses everything else with the
// file, line and column and what is supported.
//
// Accepted at module level (one statement per logical line or `;`-separated):
//   from <module> import <name> [as <alias>], ...    (parenthesised lists too)
//       only modules and names the caller's PythonImports allows, plus
//       `from __future__ import ...`;
//   <name> = <value>  and  <name>: <annotation> = <value>
//       (the annotation, e.g. dict[str, ParallelStyle], is read and ignored);
//   a string on its own (a docstring).
// Values: string literals (adjacent ones joined), integers (with a sign),
// None, True, False, tuples, lists, dicts with literal keys and `**name`
// merges, a name bound earlier in the file (its value is copied), and calls
// `Name(args, key=value)` of imported names. No attribute access,
// subscripts, operators, comprehensions, lambdas, function or class
// definitions, or calls of anything not imported.
//
// Errors are tessel::UsageError "<file>:<line>:<col>: <what>".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/python_tokens.h"

namespace tessel::config {

struct PyDictEntry;
struct PyKeywordArg;

struct PyValue {
  enum class Kind { None, Bool, Int, Str, Tuple, List, Dict, Call };
  Kind kind = Kind::None;
  SourcePos pos;
  bool boolean = false;
  int64_t integer = 0;
  std::string text;     // Str: the value; Call: the callee's imported (canonical) name
  std::string spelled;  // Call: the callee as written (an alias, if one was used)
  std::vector<PyValue> items;            // Tuple, List; Call: positional arguments
  std::vector<PyDictEntry> entries;      // Dict, in source order (a repeated key appears twice)
  std::vector<PyKeywordArg> keywords;    // Call

  bool is(Kind k) const { return kind == k; }
  // "a string", "a dict", "a call of Shard", ... for messages.
  std::string describe() const;
};

struct PyDictEntry {
  PyValue key;
  PyValue value;
};

struct PyKeywordArg {
  std::string name;
  SourcePos pos;
  PyValue value;
};

// What a file may import: module -> the names it may take from it.
struct PythonImports {
  std::map<std::string, std::vector<std::string>> allowed;
};

struct PyAssignment {
  std::string name;
  SourcePos pos;
  PyValue value;
};

struct PyModule {
  std::string source_name;
  std::vector<PyAssignment> assignments;  // in order; a name bound twice appears twice
  // Imported names as bound in the file (alias or name) -> the imported name.
  std::map<std::string, std::string> imported;

  // The last binding of `name`, or null.
  const PyAssignment* find(std::string_view name) const;
  // Every bound name, in order of first binding.
  std::vector<std::string> names() const;
};

PyModule parse_python_data(std::string_view source, const std::string& source_name, const PythonImports& imports);

}  // namespace tessel::config
