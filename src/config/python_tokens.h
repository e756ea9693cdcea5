// Tokens of Python source, for reading a Python module as data
// (python_data.h) without running it. Covers what a data file needs: names,
// keywords, string literals (quotes, triple quotes, r/u prefixes, escapes,
// adjacent literals left for the parser to join), integers, operators and
// brackets, comments, explicit (`\`) and implicit (inside brackets) line
// joining, NEWLINE at the end of each logical line and the indentation of its
// first token. f-strings and bytes are rejected here: they are code, not data.
//
// Every token carries its 1-based line and column so errors can point at it.
// Errors are tessel::UsageError "<file>:<line>:<col>: <what>".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::config {

struct SourcePos {
  int line = 1;
  int column = 1;
};

struct PyToken {
  enum class Kind {
    Name,     // identifiers and keywords (the parser tells them apart)
    String,   // text holds the decoded value
    Integer,  // text holds the digits (no sign)
    Number,   // a float or complex literal: text as written (rejected by the parser)
    Op,       // one operator or bracket: ( ) [ ] { } , : = . ; * ** - + and the rest
    Newline,  // the end of a logical line
    End,
  };
  Kind kind = Kind::End;
  std::string text;
  SourcePos pos;
  int indent = 0;  // columns before the first token of its logical line (set on that token)
  bool starts_line = false;
};

// All tokens of `source`, ending with Newline (if the last line has tokens)
// and End. `source_name` prefixes error messages.
std::vector<PyToken> tokenize_python(std::string_view source, const std::string& source_name);

// "<source_name>:<line>:<col>: <message>" as a tessel::UsageError.
[[noreturn]] void throw_python_error(const std::string& source_name, SourcePos pos, const std::string& message);

}  // namespace tessel::config
