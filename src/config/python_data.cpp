#include "config/python_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>

#include "config/suggest.h"
#include "core/error.h"

namespace tessel::config {

std::string PyValue::describe() const {
  switch (kind) {
    case Kind::None: return "None";
    case Kind::Bool: return boolean ? "True" : "False";
    case Kind::Int: return fmt::format("the integer {}", integer);
    case Kind::Str: return fmt::format("the string '{}'", text);
    case Kind::Tuple: return "a tuple";
    case Kind::List: return "a list";
    case Kind::Dict: return "a dict";
    case Kind::Call: return fmt::format("a call of {}", spelled);
  }
  return "?";
}

const PyAssignment* PyModule::find(std::string_view name) const {
  for (auto it = assignments.rbegin(); it != assignments.rend(); ++it) {
    if (it->name == name) return &*it;
  }
  return nullptr;
}

std::vector<std::string> PyModule::names() const {
  std::vector<std::string> out;
  for (const auto& a : assignments) {
    if (std::find(out.begin(), out.end(), a.name) == out.end()) out.push_back(a.name);
  }
  return out;
}

namespace {

constexpr std::array<std::string_view, 35> kKeywords = {
    "False", "None",   "True",  "and",      "as",     "assert", "async",  "await", "break",
    "class", "continue", "def", "del",      "elif",   "else",   "except", "finally", "for",
    "from",  "global", "if",    "import",   "in",     "is",     "lambda", "nonlocal", "not",
    "or",    "pass",   "raise", "return",   "try",    "while",  "with",   "yield"};

bool is_keyword(std::string_view s) {
  return std::find(kKeywords.begin(), kKeywords.end(), s) != kKeywords.end();
}

constexpr int kMaxNesting = 64;
constexpr const char* kWhatIsSupported =
    "a plan file holds only `from <module> import <names>` lines, `name = {...}` assignments of literals, "
    "tuples, lists, dicts and calls of the imported names, and docstrings";

class Parser {
 public:
  Parser(std::vector<PyToken> tokens, const std::string& name, const PythonImports& imports)
      : t_(std::move(tokens)), name_(name), imports_(imports) {
    module_.source_name = name;
  }

  PyModule run() {
    while (!at(PyToken::Kind::End)) {
      if (at(PyToken::Kind::Newline)) {
        ++k_;
        continue;
      }
      if (peek().starts_line && peek().indent > 0) fail(peek().pos, "unexpected indent: module-level lines start in column 1");
      statement();
      if (at_op(";")) {
        ++k_;
        if (!at(PyToken::Kind::Newline) && !at(PyToken::Kind::End)) continue;
      }
      if (!at(PyToken::Kind::Newline) && !at(PyToken::Kind::End)) unexpected("at the end of a statement");
    }
    return std::move(module_);
  }

 private:
  // -- tokens ---------------------------------------------------------------
  const PyToken& peek(std::size_t ahead = 0) const { return t_[std::min(k_ + ahead, t_.size() - 1)]; }
  bool at(PyToken::Kind kind) const { return peek().kind == kind; }
  bool at_op(std::string_view op) const { return at(PyToken::Kind::Op) && peek().text == op; }
  bool at_name(std::string_view n) const { return at(PyToken::Kind::Name) && peek().text == n; }
  const PyToken& next() { return t_[std::min(k_++, t_.size() - 1)]; }

  [[noreturn]] void fail(SourcePos pos, const std::string& message) const { throw_python_error(name_, pos, message); }

  static std::string shown(const PyToken& t) {
    switch (t.kind) {
      case PyToken::Kind::Newline: return "the end of the line";
      case PyToken::Kind::End: return "the end of the file";
      case PyToken::Kind::String: return "a string";
      default: return "'" + t.text + "'";
    }
  }
  [[noreturn]] void unexpected(const std::string& where) const {
    const PyToken& t = peek();
    if (t.kind == PyToken::Kind::Op) {
      const std::string& op = t.text;
      if (op == ".") fail(t.pos, "attribute access is not supported: " + std::string(kWhatIsSupported));
      if (op == "[") fail(t.pos, "subscripts are not supported: " + std::string(kWhatIsSupported));
      if (op == "(") fail(t.pos, "only imported names can be called: " + std::string(kWhatIsSupported));
      if (op != "," && op != ")" && op != "]" && op != "}" && op != ":" && op != "=")
        fail(t.pos, fmt::format("operator '{}' is not supported: {}", op, kWhatIsSupported));
    }
    if (t.kind == PyToken::Kind::Name && t.text == "for") {
      fail(t.pos, "comprehensions are code, not data: write the items out");
    }
    if (t.kind == PyToken::Kind::Name && is_keyword(t.text))
      fail(t.pos, fmt::format("'{}' is code, not data: {}", t.text, kWhatIsSupported));
    fail(t.pos, fmt::format("unexpected {} {}", shown(t), where));
  }
  void expect_op(std::string_view op, const std::string& where) {
    if (!at_op(op)) unexpected(fmt::format("{} (expected '{}')", where, op));
    ++k_;
  }
  std::string expect_name(const std::string& what) {
    if (!at(PyToken::Kind::Name) || is_keyword(peek().text)) unexpected(fmt::format("(expected {})", what));
    return next().text;
  }

  // -- statements -----------------------------------------------------------
  void statement() {
    const PyToken& t = peek();
    if (t.kind == PyToken::Kind::Name && t.text == "from") return from_import();
    if (t.kind == PyToken::Kind::Name && t.text == "import") {
      fail(t.pos, fmt::format("'import <module>' is not supported; write 'from <module> import <names>' with one of: {}",
                              allowed_modules()));
    }
    if (t.kind == PyToken::Kind::String) {  // a docstring (or any bare string): no effect
      string_literal();
      return;
    }
    if (t.kind == PyToken::Kind::Name && !is_keyword(t.text) && (peek(1).kind == PyToken::Kind::Op) &&
        (peek(1).text == "=" || peek(1).text == ":")) {
      return assignment();
    }
    if (t.kind == PyToken::Kind::Name && is_keyword(t.text) && t.text != "None" && t.text != "True" &&
        t.text != "False") {
      fail(t.pos, fmt::format("'{}' is code, not data: {}", t.text, kWhatIsSupported));
    }
    fail(t.pos, fmt::format("a module-level expression other than a docstring is not supported: {}", kWhatIsSupported));
  }

  std::string allowed_modules() const {
    std::string s;
    for (const auto& [m, _] : imports_.allowed) s += (s.empty() ? "" : ", ") + m;
    return s;
  }

  void from_import() {
    ++k_;  // from
    const SourcePos module_pos = peek().pos;
    if (at_op(".") || at_op("...")) fail(module_pos, "relative imports are not supported");
    std::string module = expect_name("a module name after 'from'");
    while (at_op(".")) {
      ++k_;
      module += "." + expect_name("a module name");
    }
    if (!at_name("import")) unexpected("(expected 'import')");
    ++k_;
    const bool future = module == "__future__";
    const auto allowed = imports_.allowed.find(module);
    if (!future && allowed == imports_.allowed.end()) {
      fail(module_pos, fmt::format("importing from '{}' is not supported: a plan file may import only from {}",
                                   module, allowed_modules()));
    }
    const bool parenthesised = at_op("(");
    if (parenthesised) ++k_;
    if (at_op("*")) fail(peek().pos, "'import *' is not supported: name what you import");
    for (;;) {
      const SourcePos pos = peek().pos;
      const std::string name = expect_name("a name to import");
      std::string bound = name;
      if (at_name("as")) {
        ++k_;
        bound = expect_name("a name after 'as'");
      }
      if (!future) {
        const auto& names = allowed->second;
        if (std::find(names.begin(), names.end(), name) == names.end()) {
          std::string list;
          for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
          fail(pos, fmt::format("'{}' cannot be imported from '{}' in a plan file.{} Supported: {}", name, module,
                                did_you_mean(closest_names(names, name)), list));
        }
        module_.imported[bound] = name;
      }
      if (!at_op(",")) break;
      ++k_;
      if (parenthesised && at_op(")")) break;  // trailing comma
    }
    if (parenthesised) expect_op(")", "closing the import list");
  }

  void assignment() {
    const PyToken& target = next();
    if (module_.imported.count(target.text)) {
      fail(target.pos, fmt::format("'{}' is an imported name; assigning to it is not supported", target.text));
    }
    if (at_op(":")) {
      ++k_;
      skip_annotation();
      if (!at_op("=")) return;  // `name: T` alone binds nothing
    }
    expect_op("=", "after the name being assigned");
    if (at(PyToken::Kind::Name) && peek(1).kind == PyToken::Kind::Op && peek(1).text == "=") {
      fail(peek(1).pos, "chained assignment (a = b = ...) is not supported: assign one name per line");
    }
    PyValue value = expression(0);
    module_.assignments.push_back(PyAssignment{target.text, target.pos, std::move(value)});
  }

  // A type annotation: names, dots, subscripts, commas, '|', strings. Read
  // and ignored (a plan's value says what it is).
  void skip_annotation() {
    int depth = 0;
    bool any = false;
    while (!at(PyToken::Kind::End) && !at(PyToken::Kind::Newline) && !(depth == 0 && (at_op("=") || at_op(";")))) {
      const PyToken& t = peek();
      const bool ok = t.kind == PyToken::Kind::Name || t.kind == PyToken::Kind::String ||
                      (t.kind == PyToken::Kind::Op && (t.text == "." || t.text == "[" || t.text == "]" ||
                                                       t.text == "," || t.text == "|"));
      if (!ok) fail(t.pos, fmt::format("unexpected {} in a type annotation", shown(t)));
      if (t.text == "[") ++depth;
      if (t.text == "]") --depth;
      any = true;
      ++k_;
    }
    if (!any) unexpected("(expected a type annotation after ':')");
  }

  // -- values ---------------------------------------------------------------
  PyValue expression(int depth) {
    if (depth > kMaxNesting) fail(peek().pos, fmt::format("values nested more than {} deep", kMaxNesting));
    PyValue v = primary(depth);
    // Anything that would continue the expression is code, not data.
    if (at_op(".") || at_op("[") || at_op("(")) unexpected("after a value");
    if (at(PyToken::Kind::Op) && !(at_op(",") || at_op(")") || at_op("]") || at_op("}") || at_op(":") ||
                                   at_op(";") || at_op("="))) {
      unexpected("after a value");
    }
    if (at(PyToken::Kind::Name) && is_keyword(peek().text)) unexpected("after a value");
    return v;
  }

  PyValue primary(int depth) {
    const PyToken& t = peek();
    PyValue v;
    v.pos = t.pos;
    switch (t.kind) {
      case PyToken::Kind::String:
        v.kind = PyValue::Kind::Str;
        v.text = string_literal();
        return v;
      case PyToken::Kind::Integer:
        return integer(false);
      case PyToken::Kind::Number:
        fail(t.pos, fmt::format("'{}': only decimal integers are supported", t.text));
      case PyToken::Kind::Op:
        if (t.text == "-" || t.text == "+") {
          ++k_;
          if (!at(PyToken::Kind::Integer)) fail(t.pos, fmt::format("'{}' applies only to an integer here", t.text));
          PyValue n = integer(t.text == "-");
          n.pos = t.pos;
          return n;
        }
        if (t.text == "(") return sequence(depth, PyValue::Kind::Tuple, ")");
        if (t.text == "[") return sequence(depth, PyValue::Kind::List, "]");
        if (t.text == "{") return dict(depth);
        unexpected("where a value was expected");
      case PyToken::Kind::Name:
        return name_value(depth);
      default:
        unexpected("where a value was expected");
    }
  }

  std::string string_literal() {
    std::string s;
    while (at(PyToken::Kind::String)) s += next().text;  // "a" "b" == "ab"
    return s;
  }

  PyValue integer(bool negative) {
    const PyToken& t = next();
    PyValue v;
    v.kind = PyValue::Kind::Int;
    v.pos = t.pos;
    // Magnitudes beyond int64 are refused, not wrapped.
    const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) + (negative ? 1 : 0);
    uint64_t n = 0;
    for (char c : t.text) {
      const uint64_t d = static_cast<uint64_t>(c - '0');
      if (n > (limit - d) / 10) fail(t.pos, fmt::format("the integer {}{} is out of range", negative ? "-" : "", t.text));
      n = n * 10 + d;
    }
    v.integer = negative ? static_cast<int64_t>(0 - n) : static_cast<int64_t>(n);
    return v;
  }

  PyValue name_value(int depth) {
    const PyToken& t = next();
    PyValue v;
    v.pos = t.pos;
    if (t.text == "None") return v;
    if (t.text == "True" || t.text == "False") {
      v.kind = PyValue::Kind::Bool;
      v.boolean = t.text == "True";
      return v;
    }
    if (is_keyword(t.text)) fail(t.pos, fmt::format("'{}' is code, not data: {}", t.text, kWhatIsSupported));
    const auto imported = module_.imported.find(t.text);
    if (at_op("(")) {
      if (imported == module_.imported.end()) {
        fail(t.pos, module_.find(t.text)
                        ? fmt::format("'{}' is a value bound in this file, not something to call", t.text)
                        : fmt::format("'{}' is not imported: only imported names can be called ({})", t.text,
                                      kWhatIsSupported));
      }
      v.kind = PyValue::Kind::Call;
      v.text = imported->second;
      v.spelled = t.text;
      call_arguments(v, depth);
      return v;
    }
    if (imported != module_.imported.end()) {
      fail(t.pos, fmt::format("'{}' without parentheses is a class, not a value: write {}()", t.text, t.text));
    }
    if (const PyAssignment* bound = module_.find(t.text)) {
      PyValue copy = bound->value;
      return copy;
    }
    const auto names = module_.names();
    fail(t.pos, fmt::format("'{}' is not defined in this file.{}", t.text, did_you_mean(closest_names(names, t.text))));
  }

  void call_arguments(PyValue& call, int depth) {
    expect_op("(", "");
    while (!at_op(")")) {
      if (at_op("*") || at_op("**")) fail(peek().pos, "'*' and '**' arguments are not supported: write each argument");
      if (at(PyToken::Kind::Name) && !is_keyword(peek().text) && peek(1).kind == PyToken::Kind::Op &&
          peek(1).text == "=") {
        const PyToken& key = next();
        ++k_;  // =
        for (const auto& kw : call.keywords) {
          if (kw.name == key.text) fail(key.pos, fmt::format("keyword argument '{}' repeated", key.text));
        }
        call.keywords.push_back(PyKeywordArg{key.text, key.pos, expression(depth + 1)});
      } else {
        if (!call.keywords.empty()) fail(peek().pos, "a positional argument after keyword arguments");
        call.items.push_back(expression(depth + 1));
      }
      if (!at_op(",")) break;
      ++k_;
    }
    expect_op(")", fmt::format("in the arguments of {}", call.spelled));
  }

  PyValue sequence(int depth, PyValue::Kind kind, std::string_view close) {
    PyValue v;
    v.kind = kind;
    v.pos = next().pos;  // ( or [
    bool comma = false;
    while (!at_op(close)) {
      v.items.push_back(expression(depth + 1));  // a comprehension's 'for' is refused by expression()
      if (!at_op(",")) break;
      comma = true;
      ++k_;
    }
    expect_op(close, kind == PyValue::Kind::Tuple ? "in a tuple" : "in a list");
    // (x) is x; (x,) and () are tuples.
    if (kind == PyValue::Kind::Tuple && v.items.size() == 1 && !comma) {
      PyValue inner = std::move(v.items[0]);
      return inner;
    }
    return v;
  }

  PyValue dict(int depth) {
    PyValue v;
    v.kind = PyValue::Kind::Dict;
    v.pos = next().pos;  // {
    while (!at_op("}")) {
      if (at_op("**")) {
        const SourcePos pos = next().pos;
        const PyValue merged = expression(depth + 1);
        if (!merged.is(PyValue::Kind::Dict)) fail(pos, fmt::format("'**' needs a dict, got {}", merged.describe()));
        for (const auto& e : merged.entries) v.entries.push_back(e);
      } else {
        PyValue key = expression(depth + 1);
        if (!at_op(":")) fail(peek().pos, "a set or a dict entry without ':' is not supported (write \"key\": value)");
        ++k_;
        if (key.is(PyValue::Kind::Dict) || key.is(PyValue::Kind::List) || key.is(PyValue::Kind::Call)) {
          fail(key.pos, fmt::format("{} cannot be a dict key", key.describe()));
        }
        PyValue value = expression(depth + 1);
        v.entries.push_back(PyDictEntry{std::move(key), std::move(value)});
      }
      if (!at_op(",")) break;
      ++k_;
    }
    expect_op("}", "in a dict");
    return v;
  }

  std::vector<PyToken> t_;
  std::size_t k_ = 0;
  const std::string& name_;
  const PythonImports& imports_;
  PyModule module_;
};

}  // namespace

PyModule parse_python_data(std::string_view source, const std::string& source_name, const PythonImports& imports) {
  return Parser(tokenize_python(source, source_name), source_name, imports).run();
}

}  // namespace tessel::config
