#include "config/loader.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "config/interpolation.h"
#include "config/overrides.h"
#include "core/error.h"

namespace tessel::config {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kOverrideKey = "_override_";
constexpr std::string_view kDefaultsKey = "defaults";

// Reads and strips `_override_` from a mapping; true when it asks to replace.
bool take_override_flag(Config& node, const std::string& where) {
  Config* flag = node.child(kOverrideKey);
  if (!flag) return false;
  if (flag->kind() != Kind::Bool) {
    throw UsageError(fmt::format("{}: '_override_' must be true or false, got {}", where,
                                 flag->to_flow()));
  }
  bool replace = flag->as_bool();
  node.erase(kOverrideKey);
  return replace;
}

// Drops `_override_` markers that had nothing to replace (e.g. in the base
// file itself) so they never reach the engine.
void strip_override_flags(Config& node, const std::string& where) {
  if (node.is_map()) {
    take_override_flag(node, where);
    for (auto& [key, child] : node.entries()) strip_override_flags(child, where + "." + key);
  } else if (node.is_list()) {
    for (auto& item : node.items()) strip_override_flags(item, where);
  }
}

std::string chain_text(const std::vector<fs::path>& stack, const fs::path& last) {
  std::string out;
  for (const auto& p : stack) out += p.string() + " -> ";
  return out + last.string();
}

Config load_recursive(const fs::path& path, std::vector<fs::path>& stack,
                      const std::string& included_from) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(path, ec);
  if (ec) canonical = fs::absolute(path, ec);
  if (ec) canonical = path;
  for (const auto& p : stack) {
    if (p == canonical) {
      throw UsageError(fmt::format("config inheritance cycle: {} (a file may not list itself in "
                                   "'defaults:', directly or through other files)",
                                   chain_text(stack, canonical)));
    }
  }
  // The non-throwing form: a name the system refuses (too long, say) is the
  // user's error to read, not a std::filesystem exception (found by fuzzing).
  std::error_code status_error;
  if (!fs::is_regular_file(canonical, status_error)) {
    throw UsageError(fmt::format("config file not found: '{}'{}{}", path.string(),
                                 status_error ? fmt::format(" ({})", status_error.message()) : std::string(),
                                 included_from.empty()
                                     ? std::string()
                                     : fmt::format(" (listed in 'defaults:' of '{}')", included_from)));
  }
  std::ifstream in(canonical);
  if (!in) throw UsageError(fmt::format("cannot read config file '{}'", path.string()));
  std::stringstream text;
  text << in.rdbuf();
  Config file = parse_yaml(text.str(), path.string());
  if (!file.is_map()) {
    throw UsageError(fmt::format("{}: the top level of a config file must be a mapping (key: value "
                                 "lines), got {}",
                                 path.string(), Config::kind_name(file.kind())));
  }

  std::vector<std::string> parents;
  if (const Config* defaults = file.child(kDefaultsKey)) {
    auto bad = [&]() {
      return UsageError(fmt::format("{}: 'defaults' must be a file name or a list of file names, "
                                    "got {}",
                                    path.string(), defaults->to_flow()));
    };
    if (defaults->kind() == Kind::String) {
      parents.push_back(defaults->as_string());
    } else if (defaults->is_list()) {
      for (const auto& item : defaults->items()) {
        if (item.kind() != Kind::String) throw bad();
        parents.push_back(item.as_string());
      }
    } else if (!defaults->is_null()) {
      throw bad();
    }
    file.erase(kDefaultsKey);
  }

  stack.push_back(canonical);
  Config merged = Config::map();
  for (const auto& parent : parents) {
    fs::path parent_path = fs::path(parent).is_absolute() ? fs::path(parent)
                                                          : canonical.parent_path() / parent;
    merge_into(merged, load_recursive(parent_path, stack, path.string()));
  }
  stack.pop_back();
  merge_into(merged, file);
  return merged;
}

void merge_node(Config& base, const Config& overlay, const std::string& where) {
  if (!overlay.is_map() || !base.is_map()) {
    base = overlay;
    strip_override_flags(base, where);
    return;
  }
  Config patch = overlay;
  if (take_override_flag(patch, where)) {
    base = std::move(patch);
    strip_override_flags(base, where);
    return;
  }
  for (const auto& [key, value] : patch.entries()) {
    std::string child_where = where.empty() ? key : where + "." + key;
    if (Config* existing = base.child(key)) {
      merge_node(*existing, value, child_where);
    } else {
      base.entries().emplace_back(key, value);
      strip_override_flags(base.entries().back().second, child_where);
    }
  }
}

}  // namespace

void merge_into(Config& base, const Config& overlay) {
  std::string source = base.source_path();
  merge_node(base, overlay, "");
  base.set_source_path(source);
}

Config load_yaml_file(const fs::path& path) {
  std::vector<fs::path> stack;
  Config out = load_recursive(path, stack, "");
  out.set_source_path(path.string());
  return out;
}

Config load_config(const fs::path& path, const std::vector<std::string>& overrides) {
  Config out = load_yaml_file(path);
  apply_overrides(out, overrides);
  resolve_interpolations(out);
  return out;
}

}  // namespace tessel::config
