#include "config/flow_value.h"

#include <fmt/format.h>

#include <cctype>

#include "config/scalar.h"
#include "core/error.h"

namespace tessel::config {

namespace {

class FlowParser {
 public:
  explicit FlowParser(std::string_view text) : text_(text) {}

  Config parse_top() {
    skip_ws();
    if (at_end()) return Config(std::string());
    Config value = peek() == '[' || peek() == '{' || peek() == '\'' || peek() == '"'
                       ? parse_value("")
                       : Config(primitive_text(""));  // top level: commas and colons are text
    skip_ws();
    if (!at_end()) fail("unexpected text after the value");
    if (value.kind() == Kind::String && !quoted_) value = resolve_plain_scalar(value.as_string());
    return value;
  }

 private:
  // `stops`: characters that end a bare word at this nesting level.
  Config parse_value(std::string_view stops) {
    skip_ws();
    quoted_ = false;
    if (at_end()) fail("expected a value");
    char c = peek();
    if (c == '[') return parse_list();
    if (c == '{') return parse_dict();
    if (c == '\'' || c == '"') {
      quoted_ = true;
      return Config(parse_quoted());
    }
    std::string word = primitive_text(stops);
    if (word.empty()) fail("expected a value");
    return resolve_plain_scalar(word);
  }

  Config parse_list() {
    ++pos_;  // '['
    std::vector<Config> items;
    skip_ws();
    if (consume(']')) return Config::list(std::move(items));
    while (true) {
      items.push_back(parse_value(",]"));
      skip_ws();
      if (consume(']')) break;
      if (!consume(',')) fail("expected ',' or ']' in a list");
    }
    return Config::list(std::move(items));
  }

  Config parse_dict() {
    ++pos_;  // '{'
    Config out = Config::map();
    skip_ws();
    if (consume('}')) return out;
    while (true) {
      skip_ws();
      std::string key;
      if (!at_end() && (peek() == '\'' || peek() == '"')) {
        key = parse_quoted();
      } else {
        key = primitive_text(":,}");
      }
      if (key.empty()) fail("expected a key in a mapping");
      skip_ws();
      if (!consume(':')) fail(fmt::format("expected ':' after key '{}'", key));
      if (out.child(key)) fail(fmt::format("duplicate key '{}'", key));
      out.entries().emplace_back(key, parse_value(",}"));
      skip_ws();
      if (consume('}')) break;
      if (!consume(',')) fail("expected ',' or '}' in a mapping");
    }
    return out;
  }

  std::string parse_quoted() {
    char q = text_[pos_++];
    std::string out;
    while (true) {
      if (at_end()) fail(fmt::format("unterminated {}-quoted string", q == '"' ? "double" : "single"));
      char c = text_[pos_++];
      if (c == q) {
        if (q == '\'' && !at_end() && peek() == '\'') {  // YAML '' escape
          out += '\'';
          ++pos_;
          continue;
        }
        return out;
      }
      if (c == '\\' && !at_end() && (peek() == q || peek() == '\\')) {
        out += text_[pos_++];
        continue;
      }
      out += c;
    }
  }

  // A bare word up to an unnested stop character, trimmed. `${...}` is
  // copied whole (it may hold ':' and ',').
  std::string primitive_text(std::string_view stops) {
    size_t start = pos_;
    int depth = 0;
    while (!at_end()) {
      char c = peek();
      if (c == '$' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '{') {
        ++depth;
        pos_ += 2;
        continue;
      }
      if (depth > 0) {
        if (c == '}') --depth;
        ++pos_;
        continue;
      }
      if (stops.find(c) != std::string_view::npos) break;
      if (!stops.empty() && (c == '[' || c == '{')) fail("unexpected bracket inside a value; quote it");
      ++pos_;
    }
    if (depth > 0) fail("unterminated '${' interpolation");
    std::string_view word = text_.substr(start, pos_ - start);
    while (!word.empty() && std::isspace(static_cast<unsigned char>(word.back()))) word.remove_suffix(1);
    return std::string(word);
  }

  void skip_ws() {
    while (!at_end() && std::isspace(static_cast<unsigned char>(peek()))) ++pos_;
  }
  bool consume(char c) {
    if (!at_end() && peek() == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  [[noreturn]] void fail(const std::string& what) const {
    throw UsageError(fmt::format("cannot parse value '{}' at character {}: {} (values look like 3, "
                                 "1e-5, true, null, 'text', [1, 2] or {{k: v}})",
                                 text_, pos_ + 1, what));
  }

  std::string_view text_;
  size_t pos_ = 0;
  bool quoted_ = false;
};

}  // namespace

Config parse_flow_value(std::string_view text) { return FlowParser(text).parse_top(); }

}  // namespace tessel::config
