#include "config/config.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "config/scalar.h"
#include "config/suggest.h"
#include "core/error.h"

namespace tessel::config {

Config::Config() = default;
Config::Config(std::nullptr_t) : kind_(Kind::Null) {}
Config::Config(bool value) : kind_(Kind::Bool), b_(value) {}
Config::Config(double value) : kind_(Kind::Float), f_(value) {}
Config::Config(std::string value) : kind_(Kind::String), s_(std::move(value)) {}
Config::Config(const char* value) : kind_(Kind::String), s_(value) {}

Config Config::list(std::vector<Config> items) {
  Config out;
  out.kind_ = Kind::List;
  out.items_ = std::move(items);
  return out;
}

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    std::string_view segment = path.substr(start, dot == std::string_view::npos ? dot : dot - start);
    if (segment.empty()) {
      throw UsageError(fmt::format("invalid config key '{}': empty segment (keys look like 'a.b.c')", path));
    }
    out.emplace_back(segment);
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return out;
}

namespace {

// A list index segment: digits only, no sign (so "-1" stays a map key).
std::optional<size_t> list_index(std::string_view segment) {
  if (segment.empty() || segment.size() > 18) return std::nullopt;
  size_t value = 0;
  for (char c : segment) {
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + static_cast<size_t>(c - '0');
  }
  return value;
}

}  // namespace

const Config* Config::child(std::string_view key) const {
  if (kind_ == Kind::Map) {
    for (const auto& entry : entries_) {
      if (entry.first == key) return &entry.second;
    }
  } else if (kind_ == Kind::List) {
    auto index = list_index(key);
    if (index && *index < items_.size()) return &items_[*index];
  }
  return nullptr;
}

Config* Config::child(std::string_view key) {
  return const_cast<Config*>(static_cast<const Config*>(this)->child(key));
}

const Config* Config::find(std::string_view path) const {
  const Config* node = this;
  for (const auto& segment : split_path(path)) {
    node = node->child(segment);
    if (!node) return nullptr;
  }
  return node;
}

Config* Config::find(std::string_view path) {
  return const_cast<Config*>(static_cast<const Config*>(this)->find(path));
}

bool Config::has(std::string_view path) const { return find(path) != nullptr; }

const Config& Config::at(std::string_view path) const {
  if (const Config* node = find(path)) return *node;
  throw UsageError(fmt::format("missing config key '{}'.{}", path,
                               did_you_mean(closest_keys(*this, path))));
}

Config Config::sub(std::string_view path) const {
  Config out = at(path);
  if (!out.is_map()) throw_type_error(path, "a mapping", out);
  out.source_ = source_;
  return out;
}

void Config::set(std::string_view path, Config value) {
  std::vector<std::string> segments = split_path(path);
  Config* node = this;
  std::string walked;
  for (size_t i = 0; i < segments.size(); ++i) {
    const std::string& segment = segments[i];
    bool last = i + 1 == segments.size();
    if (node->is_list()) {
      auto index = list_index(segment);
      if (!index || *index >= node->items_.size()) {
        throw UsageError(fmt::format("cannot set '{}': '{}' is a list of {} items and '{}' is not "
                                     "an index in it",
                                     path, walked, node->items_.size(), segment));
      }
      node = &node->items_[*index];
      if (last) *node = std::move(value);
    } else {
      if (node->is_null()) *node = Config::map();  // `a: null` then `a.b=1` makes a mapping
      if (!node->is_map()) {
        throw UsageError(fmt::format("cannot set '{}': '{}' is {} ({}), not a mapping", path, walked,
                                     kind_name(node->kind_), node->to_flow()));
      }
      Config* next = node->child(segment);
      if (last) {
        if (next) {
          *next = std::move(value);
        } else {
          node->entries_.emplace_back(segment, std::move(value));
        }
      } else if (!next) {
        node->entries_.emplace_back(segment, Config::map());
        next = &node->entries_.back().second;
      }
      node = next;
    }
    walked += (walked.empty() ? "" : ".") + segment;
  }
}

bool Config::erase(std::string_view path) {
  std::vector<std::string> segments = split_path(path);
  std::string last = segments.back();
  segments.pop_back();
  Config* parent = this;
  for (const auto& segment : segments) {
    parent = parent->child(segment);
    if (!parent) return false;
  }
  if (parent->is_map()) {
    auto& e = parent->entries_;
    for (auto it = e.begin(); it != e.end(); ++it) {
      if (it->first == last) {
        e.erase(it);
        return true;
      }
    }
    return false;
  }
  if (parent->is_list()) {
    auto index = list_index(last);
    if (!index || *index >= parent->items_.size()) return false;
    parent->items_.erase(parent->items_.begin() + static_cast<std::ptrdiff_t>(*index));
    return true;
  }
  return false;
}

std::vector<std::string> Config::keys() const {
  std::vector<std::string> out;
  for (const auto& entry : entries_) out.push_back(entry.first);
  return out;
}

size_t Config::size() const {
  if (kind_ == Kind::Map) return entries_.size();
  if (kind_ == Kind::List) return items_.size();
  return 0;
}

const char* Config::kind_name(Kind kind) {
  switch (kind) {
    case Kind::Null: return "null";
    case Kind::Bool: return "a boolean";
    case Kind::Int: return "an integer";
    case Kind::Float: return "a number";
    case Kind::String: return "a string";
    case Kind::List: return "a list";
    case Kind::Map: return "a mapping";
  }
  return "?";
}

namespace {

std::string float_text(double value) {
  if (std::isnan(value)) return ".nan";
  if (std::isinf(value)) return value > 0 ? ".inf" : "-.inf";
  std::string s = fmt::format("{}", value);
  // Keep floats floats when read back: "1" would be an int.
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    out += c;
    if (c == '\'') out += '\'';  // YAML single-quote escape
  }
  return out + "'";
}

}  // namespace

std::string Config::to_text() const {
  switch (kind_) {
    case Kind::Null: return "null";
    case Kind::Bool: return b_ ? "true" : "false";
    case Kind::Int: return std::to_string(i_);
    case Kind::Float: return float_text(f_);
    case Kind::String: return s_;
    default: return to_flow();
  }
}

std::string Config::to_flow() const {
  switch (kind_) {
    case Kind::String: return quote(s_);
    case Kind::List: {
      std::string out = "[";
      for (size_t i = 0; i < items_.size(); ++i) out += (i ? ", " : "") + items_[i].to_flow();
      return out + "]";
    }
    case Kind::Map: {
      std::string out = "{";
      for (size_t i = 0; i < entries_.size(); ++i) {
        out += (i ? ", " : "") + entries_[i].first + ": " + entries_[i].second.to_flow();
      }
      return out + "}";
    }
    default: return to_text();
  }
}

bool operator==(const Config& a, const Config& b) {
  if (a.kind_ != b.kind_) return false;
  switch (a.kind_) {
    case Kind::Null: return true;
    case Kind::Bool: return a.b_ == b.b_;
    case Kind::Int: return a.i_ == b.i_;
    case Kind::Float: return a.f_ == b.f_ || (std::isnan(a.f_) && std::isnan(b.f_));
    case Kind::String: return a.s_ == b.s_;
    case Kind::List: return a.items_ == b.items_;
    case Kind::Map: return a.entries_ == b.entries_;
  }
  return false;
}

void throw_type_error(std::string_view path, std::string_view expected, const Config& got) {
  std::string shown = got.kind() == Kind::String ? quote(got.as_string())
                      : got.is_scalar()           ? got.to_text()
                                                  : std::string(Config::kind_name(got.kind())) + " " + got.to_flow();
  throw UsageError(fmt::format("{}: expected {}, got {}", path, expected, shown));
}

bool Decoder<bool>::decode(const Config& node, std::string_view path) {
  if (node.kind() != Kind::Bool) throw_type_error(path, "a boolean (true/false)", node);
  return node.as_bool();
}

int64_t Decoder<int64_t>::decode(const Config& node, std::string_view path) {
  if (node.kind() == Kind::Int) return node.as_int();
  // 2.0 is an integer written as a float (e.g. from ${mul:...}); 2.5 is not.
  if (node.kind() == Kind::Float && std::isfinite(node.as_float()) &&
      std::floor(node.as_float()) == node.as_float() && std::fabs(node.as_float()) < 9.0e15) {
    return static_cast<int64_t>(node.as_float());
  }
  throw_type_error(path, "an integer", node);
}

int Decoder<int>::decode(const Config& node, std::string_view path) {
  int64_t value = Decoder<int64_t>::decode(node, path);
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
    throw UsageError(fmt::format("{}: {} is out of range for a 32-bit integer", path, value));
  }
  return static_cast<int>(value);
}

double Decoder<double>::decode(const Config& node, std::string_view path) {
  if (node.kind() == Kind::Float) return node.as_float();
  if (node.kind() == Kind::Int) return static_cast<double>(node.as_int());
  throw_type_error(path, "a number", node);
}

std::string Decoder<std::string>::decode(const Config& node, std::string_view path) {
  // Numbers and booleans read as text (a model name "7" is still a name);
  // null, lists and mappings are mistakes.
  if (node.kind() == Kind::String) return node.as_string();
  if (node.is_scalar() && !node.is_null()) return node.to_text();
  throw_type_error(path, "a string", node);
}

}  // namespace tessel::config
