#include "config/python_tokens.h"

#include <fmt/format.h>

#include <array>
#include <cctype>

#include "core/error.h"
#include "core/utf8.h"

namespace tessel::config {

void throw_python_error(const std::string& source_name, SourcePos pos, const std::string& message) {
  throw UsageError(fmt::format("{}:{}:{}: {}", source_name, pos.line, pos.column, message));
}

namespace {

bool is_name_start(unsigned char c) { return std::isalpha(c) || c == '_' || c >= 0x80; }
bool is_name_char(unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; }

// Longest first, so "**" wins over "*".
constexpr std::array<std::string_view, 24> kMultiCharOps = {
    "**=", "//=", ">>=", "<<=", "...", "**", "//", "->", ":=", "==", "!=", "<=",
    ">=",  "<<",  ">>",  "+=",  "-=",  "*=", "/=", "%=", "&=", "|=", "^=", "@="};
constexpr std::string_view kSingleCharOps = "()[]{},:.;=+-*/%@<>&|^~";

class Lexer {
 public:
  Lexer(std::string_view src, const std::string& name) : src_(src), name_(name) {}

  std::vector<PyToken> run() {
    bool at_line_start = true;
    while (i_ < src_.size()) {
      if (at_line_start && depth_ == 0) {
        // Indentation of a logical line; blank and comment-only lines vanish.
        int indent = 0;
        while (i_ < src_.size() && (src_[i_] == ' ' || src_[i_] == '\t' || src_[i_] == '\f')) {
          indent += src_[i_] == '\t' ? 8 - indent % 8 : 1;
          advance();
        }
        if (i_ >= src_.size()) break;
        if (src_[i_] == '#') skip_comment();
        if (i_ < src_.size() && (src_[i_] == '\n' || src_[i_] == '\r')) {
          newline_char();
          continue;
        }
        if (i_ >= src_.size()) break;
        pending_indent_ = indent;
        line_has_token_ = false;
        at_line_start = false;
      }
      const char c = src_[i_];
      if (c == ' ' || c == '\t' || c == '\f') {
        advance();
      } else if (c == '#') {
        skip_comment();
      } else if (c == '\n' || c == '\r') {
        newline_char();
        if (depth_ == 0) {
          push(PyToken::Kind::Newline, "", here_before_newline_);
          at_line_start = true;
        }
      } else if (c == '\\') {
        const SourcePos p = pos_;
        advance();
        if (i_ < src_.size() && (src_[i_] == '\n' || src_[i_] == '\r')) {
          newline_char();  // explicit line joining
        } else {
          throw_python_error(name_, p, "unexpected '\\' (a backslash only joins lines at the end of a line)");
        }
      } else if (is_name_start(static_cast<unsigned char>(c))) {
        lex_name_or_string();
      } else if (std::isdigit(static_cast<unsigned char>(c)) ||
                 (c == '.' && i_ + 1 < src_.size() && std::isdigit(static_cast<unsigned char>(src_[i_ + 1])))) {
        lex_number();
      } else if (c == '"' || c == '\'') {
        lex_string(pos_, /*raw=*/false);
      } else {
        lex_op();
      }
    }
    if (depth_ > 0) {
      throw_python_error(name_, open_brackets_.back().pos,
                         fmt::format("'{}' is never closed (the file ends inside it)", open_brackets_.back().text));
    }
    if (line_has_token_) push(PyToken::Kind::Newline, "", pos_);
    push(PyToken::Kind::End, "", pos_);
    return std::move(out_);
  }

 private:
  void advance() {
    ++i_;
    ++pos_.column;
  }
  // One line break ("\n", "\r\n" or "\r").
  void newline_char() {
    here_before_newline_ = pos_;
    if (src_[i_] == '\r' && i_ + 1 < src_.size() && src_[i_ + 1] == '\n') ++i_;
    ++i_;
    ++pos_.line;
    pos_.column = 1;
  }
  void skip_comment() {
    while (i_ < src_.size() && src_[i_] != '\n' && src_[i_] != '\r') advance();
  }

  void push(PyToken::Kind kind, std::string text, SourcePos pos) {
    PyToken t;
    t.kind = kind;
    t.text = std::move(text);
    t.pos = pos;
    if (kind != PyToken::Kind::Newline && kind != PyToken::Kind::End && !line_has_token_) {
      t.starts_line = true;
      t.indent = pending_indent_;
      line_has_token_ = true;
    }
    if (kind == PyToken::Kind::Newline) line_has_token_ = false;
    out_.push_back(std::move(t));
  }

  void lex_name_or_string() {
    const SourcePos start = pos_;
    const std::size_t begin = i_;
    while (i_ < src_.size() && is_name_char(static_cast<unsigned char>(src_[i_]))) advance();
    std::string word(src_.substr(begin, i_ - begin));
    if (i_ < src_.size() && (src_[i_] == '"' || src_[i_] == '\'') && word.size() <= 2) {
      std::string prefix;
      for (char ch : word) prefix += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (prefix == "r" || prefix == "u") {
        lex_string(start, prefix == "r");
        return;
      }
      if (prefix.find('f') != std::string::npos) {
        throw_python_error(name_, start, "f-strings are code, not data: write a plain string literal");
      }
      if (prefix.find('b') != std::string::npos) {
        throw_python_error(name_, start, "bytes literals are not supported: write a plain string literal");
      }
    }
    push(PyToken::Kind::Name, std::move(word), start);
  }

  void lex_number() {
    const SourcePos start = pos_;
    const std::size_t begin = i_;
    bool integer = true;
    while (i_ < src_.size()) {
      const char c = src_[i_];
      if (std::isdigit(static_cast<unsigned char>(c)) || c == '_') {
        advance();
      } else if (c == '.' || std::isalpha(static_cast<unsigned char>(c))) {
        integer = false;  // 1.5, 1e3, 2j, 0x10: not an integer in decimal digits
        const bool exponent = c == 'e' || c == 'E';
        advance();
        if (exponent && i_ < src_.size() && (src_[i_] == '+' || src_[i_] == '-')) advance();
      } else {
        break;
      }
    }
    std::string text(src_.substr(begin, i_ - begin));
    if (integer) {
      std::string digits;
      for (char c : text) {
        if (c != '_') digits += c;
      }
      if (digits.size() > 1 && digits[0] == '0' && digits.find_first_not_of('0') != std::string::npos) {
        throw_python_error(name_, start, fmt::format("'{}': leading zeros are not allowed in an integer", text));
      }
      push(PyToken::Kind::Integer, std::move(digits), start);
    } else {
      push(PyToken::Kind::Number, std::move(text), start);
    }
  }

  // A string literal starting at the quote at i_ (prefix already consumed).
  void lex_string(SourcePos start, bool raw) {
    const char quote = src_[i_];
    const bool triple = i_ + 2 < src_.size() && src_[i_ + 1] == quote && src_[i_ + 2] == quote;
    for (int k = 0; k < (triple ? 3 : 1); ++k) advance();
    std::string value;
    for (;;) {
      if (i_ >= src_.size()) {
        throw_python_error(name_, start, "the string literal is never closed");
      }
      const char c = src_[i_];
      if (c == quote) {
        if (!triple) {
          advance();
          break;
        }
        if (i_ + 2 < src_.size() && src_[i_ + 1] == quote && src_[i_ + 2] == quote) {
          for (int k = 0; k < 3; ++k) advance();
          break;
        }
        value += c;
        advance();
      } else if (c == '\n' || c == '\r') {
        if (!triple) throw_python_error(name_, start, "the string literal is not closed on its line");
        value += '\n';
        newline_char();
      } else if (c == '\\') {
        lex_escape(value, raw);
      } else {
        value += c;
        advance();
      }
    }
    push(PyToken::Kind::String, std::move(value), start);
  }

  void lex_escape(std::string& value, bool raw) {
    const SourcePos at = pos_;
    advance();
    if (i_ >= src_.size()) throw_python_error(name_, at, "the string literal is never closed");
    const char e = src_[i_];
    if (e == '\n' || e == '\r') {  // backslash-newline: the line break is dropped (kept in raw strings)
      if (raw) value += "\\\n";
      newline_char();
      return;
    }
    if (raw) {
      value += '\\';
      value += e;
      advance();
      return;
    }
    advance();
    switch (e) {
      case 'n': value += '\n'; return;
      case 't': value += '\t'; return;
      case 'r': value += '\r'; return;
      case '0': value += '\0'; return;
      case 'a': value += '\a'; return;
      case 'b': value += '\b'; return;
      case 'f': value += '\f'; return;
      case 'v': value += '\v'; return;
      case '\\': case '\'': case '"': value += e; return;
      case 'x': case 'u': case 'U': {
        const int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        uint32_t code = 0;
        for (int k = 0; k < digits; ++k) {
          if (i_ >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[i_]))) {
            throw_python_error(name_, at, fmt::format("'\\{}' needs {} hex digits", e, digits));
          }
          const char h = src_[i_];
          code = code * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h)) ? h - '0'
                                                                                                 : std::tolower(h) - 'a' + 10);
          advance();
        }
        if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
          throw_python_error(name_, at, fmt::format("escape U+{:X} is not a valid code point", code));
        }
        append_utf8(value, static_cast<char32_t>(code));
        return;
      }
      default:  // Python keeps unknown escapes as written
        value += '\\';
        value += e;
        return;
    }
  }

  void lex_op() {
    const SourcePos start = pos_;
    for (std::string_view op : kMultiCharOps) {
      if (src_.substr(i_, op.size()) == op) {
        for (std::size_t k = 0; k < op.size(); ++k) advance();
        push(PyToken::Kind::Op, std::string(op), start);
        return;
      }
    }
    const char c = src_[i_];
    if (kSingleCharOps.find(c) == std::string_view::npos) {
      const unsigned char u = static_cast<unsigned char>(c);
      throw_python_error(name_, start,
                         std::isprint(u) ? fmt::format("unexpected character '{}'", c)
                                         : fmt::format("unexpected byte 0x{:02X}", static_cast<unsigned>(u)));
    }
    advance();
    if (c == '(' || c == '[' || c == '{') {
      ++depth_;
      open_brackets_.push_back(PyToken{PyToken::Kind::Op, std::string(1, c), start});
    } else if (c == ')' || c == ']' || c == '}') {
      const char open = c == ')' ? '(' : c == ']' ? '[' : '{';
      if (depth_ == 0) throw_python_error(name_, start, fmt::format("unmatched '{}'", c));
      if (open_brackets_.back().text[0] != open) {
        const PyToken& o = open_brackets_.back();
        throw_python_error(name_, start, fmt::format("'{}' does not match '{}' opened at line {} column {}", c,
                                                     o.text, o.pos.line, o.pos.column));
      }
      --depth_;
      open_brackets_.pop_back();
    }
    push(PyToken::Kind::Op, std::string(1, c), start);
  }

  std::string_view src_;
  const std::string& name_;
  std::size_t i_ = 0;
  SourcePos pos_;
  SourcePos here_before_newline_;
  int depth_ = 0;
  std::vector<PyToken> open_brackets_;
  int pending_indent_ = 0;
  bool line_has_token_ = false;
  std::vector<PyToken> out_;
};

}  // namespace

std::vector<PyToken> tokenize_python(std::string_view source, const std::string& source_name) {
  // A UTF-8 byte-order mark is allowed at the very start, as Python does.
  if (source.substr(0, 3) == "\xEF\xBB\xBF") source.remove_prefix(3);
  return Lexer(source, source_name).run();
}

}  // namespace tessel::config
