#include "config/overrides.h"

#include <fmt/format.h>

#include <cctype>

#include "config/flow_value.h"
#include "config/suggest.h"
#include "core/error.h"
#include "core/text.h"

namespace tessel::config {

namespace {

constexpr const char* kGrammar =
    "overrides look like 'a.b=VALUE' (change), '+a.b=VALUE' (add), '++a.b=VALUE' (add or "
    "change) or '~a.b' (delete)";

void check_key(std::string_view key, std::string_view text) {
  if (key.empty()) throw UsageError(fmt::format("override '{}' has no key; {}", text, kGrammar));
  for (char c : key) {
    if (std::isspace(static_cast<unsigned char>(c)) || c == '=' || c == '~' || c == '+') {
      throw UsageError(fmt::format("override '{}': invalid character '{}' in key '{}'; {}", text, c,
                                   key, kGrammar));
    }
  }
  try {
    split_path(key);
  } catch (const UsageError& e) {
    throw UsageError(fmt::format("override '{}': {}", text, e.what()));
  }
}

// The nearest existing ancestor of `key` that is not a mapping or list blocks
// adding below it; report it rather than silently replacing a scalar.
void check_parents_addable(const Config& config, const Override& o) {
  std::vector<std::string> segments = split_path(o.key);
  const Config* node = &config;
  std::string walked;
  for (size_t i = 0; i + 1 < segments.size(); ++i) {
    node = node->child(segments[i]);
    walked += (walked.empty() ? "" : ".") + segments[i];
    if (!node) return;  // the rest will be created
    if (node->is_list() && i + 2 == segments.size() && !node->child(segments[i + 1])) {
      throw UsageError(fmt::format("override '{}': '{}' is a list of {} items; a list element can "
                                   "only be changed by its index (0..{}), not added",
                                   o.text, walked, node->size(), node->size() - 1));
    }
    if (node->is_scalar() && !node->is_null()) {
      throw UsageError(fmt::format("override '{}': cannot add below '{}', which is {} ({})", o.text,
                                   walked, Config::kind_name(node->kind()), node->to_flow()));
    }
  }
}

}  // namespace

Override parse_override(std::string_view raw) {
  Override o;
  o.text = std::string(raw);
  std::string_view text = trim_whitespace(raw);
  if (text.empty()) throw UsageError(fmt::format("empty override; {}", kGrammar));
  if (text.substr(0, 2) == "++") {
    o.op = Override::Op::ForceSet;
    text.remove_prefix(2);
  } else if (text[0] == '+') {
    o.op = Override::Op::Add;
    text.remove_prefix(1);
  } else if (text[0] == '~') {
    o.op = Override::Op::Delete;
    text.remove_prefix(1);
  }
  size_t eq = text.find('=');
  if (eq == std::string_view::npos) {
    if (o.op != Override::Op::Delete) {
      throw UsageError(fmt::format("override '{}' has no '=VALUE'; {}", o.text, kGrammar));
    }
    o.key = std::string(trim_whitespace(text));
  } else {
    o.key = std::string(trim_whitespace(text.substr(0, eq)));
    o.value_text = std::string(trim_whitespace(text.substr(eq + 1)));
    try {
      o.value = parse_flow_value(o.value_text);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("override '{}': {}", o.text, e.what()));
    }
  }
  check_key(o.key, o.text);
  return o;
}

void apply_override(Config& config, const Override& o) {
  const Config* existing = config.find(o.key);
  switch (o.op) {
    case Override::Op::Set:
      if (!existing) {
        throw UsageError(fmt::format(
            "override '{}': unknown key '{}'.{} To add a new key use '+{}={}'", o.text, o.key,
            did_you_mean(closest_keys(config, o.key)), o.key, o.value_text));
      }
      config.set(o.key, *o.value);
      return;
    case Override::Op::Add:
      if (existing) {
        throw UsageError(fmt::format(
            "override '{}': key '{}' already exists (value {}). To change it use '{}={}' (or "
            "'++{}={}' to add or change)",
            o.text, o.key, existing->to_flow(), o.key, o.value_text, o.key, o.value_text));
      }
      check_parents_addable(config, o);
      config.set(o.key, *o.value);
      return;
    case Override::Op::ForceSet:
      if (!existing) check_parents_addable(config, o);
      config.set(o.key, *o.value);
      return;
    case Override::Op::Delete:
      if (!existing) {
        throw UsageError(fmt::format("override '{}': cannot delete '{}': no such key.{}", o.text,
                                     o.key, did_you_mean(closest_keys(config, o.key))));
      }
      if (o.value && !(*existing == *o.value)) {
        throw UsageError(fmt::format("override '{}': '{}' is {}, not {}; nothing deleted", o.text,
                                     o.key, existing->to_flow(), o.value->to_flow()));
      }
      config.erase(o.key);
      return;
  }
}

void apply_overrides(Config& config, const std::vector<std::string>& overrides) {
  for (const auto& text : overrides) apply_override(config, parse_override(text));
}

}  // namespace tessel::config
