#include "parallel/custom_plan.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

#include "config/loader.h"
#include "core/error.h"
#include "parallel/plan_mapping.h"
#include "parallel/python_plan.h"

namespace tessel::parallel {

namespace fs = std::filesystem;

namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// Existing file for `rel` in the search dirs (or as given when absolute).
std::optional<fs::path> find_file(const std::string& rel, const std::vector<std::string>& dirs,
                                  std::vector<std::string>& tried) {
  // Non-throwing checks: a name the system refuses (too long) is "not found".
  std::error_code ec;
  fs::path p(rel);
  if (p.is_absolute()) {
    tried.push_back(p.string());
    return fs::is_regular_file(p, ec) ? std::optional<fs::path>(p) : std::nullopt;
  }
  for (const auto& d : dirs) {
    fs::path candidate = fs::path(d) / p;
    tried.push_back(candidate.string());
    if (fs::is_regular_file(candidate, ec)) return candidate;
  }
  return std::nullopt;
}

bool is_python(const fs::path& file) { return file.extension() == ".py"; }

// A plan file read once: a Python module (read as data) or YAML/JSON.
struct PlanFile {
  fs::path path;
  std::optional<config::PyModule> python;
  std::optional<config::Config> yaml;

  explicit PlanFile(fs::path p) : path(std::move(p)) {
    if (is_python(path)) {
      python = read_python_plan_file(path);
    } else {
      yaml = config::load_yaml_file(path);
    }
  }
  bool has(const std::string& key) const { return python ? python->find(key) != nullptr : yaml->find(key) != nullptr; }
  std::vector<std::string> keys() const { return python ? python->names() : yaml->keys(); }
  Plan plan(const std::string& key) const {
    if (python) return plan_from_python(*python, key);
    return plan_from_mapping(*yaml->find(key), fmt::format("{}:{}", path.string(), key));
  }
};

Plan plan_at_key(const fs::path& file, const std::string& key, const std::string& form) {
  const PlanFile plan_file(file);
  if (!plan_file.has(key)) {
    throw UsageError(fmt::format("custom_parallel_plan ({}): {} has no {} '{}' (it defines: {})", form, file.string(),
                                 is_python(file) ? "module-level name" : "key", key, join(plan_file.keys())));
  }
  return plan_file.plan(key);
}

CustomPlan load_plugin(const std::string& ref, const std::vector<std::string>& dirs) {
  const auto colon = ref.rfind(':');
  const std::string lib = ref.substr(0, colon), symbol = ref.substr(colon + 1);
  const std::string form = "plugin 'path/lib.so:symbol'";
  if (symbol.empty()) {
    throw UsageError(fmt::format("custom_parallel_plan '{}' ({}): no symbol after ':'", ref, form));
  }
  std::vector<std::string> tried;
  auto path = find_file(lib, dirs, tried);
  if (!path) {
    throw UsageError(fmt::format("custom_parallel_plan '{}' ({}): library not found; looked at {}", ref, form,
                                 join(tried)));
  }
  // Kept loaded for the life of the process: the plan's strings were built by
  // its code, and style objects may point into it.
  void* handle = dlopen(fs::absolute(*path).c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    throw UsageError(fmt::format("custom_parallel_plan '{}' ({}): cannot load {}: {}", ref, form, path->string(),
                                 err ? err : "unknown error"));
  }
  dlerror();
  void* sym = dlsym(handle, symbol.c_str());
  if (sym == nullptr) {
    const char* err = dlerror();
    throw UsageError(fmt::format("custom_parallel_plan '{}' ({}): {} has no symbol '{}' ({}); declare it "
                                 "extern \"C\" void {}(tessel::parallel::Plan*)",
                                 ref, form, path->string(), symbol, err ? err : "not found", symbol));
  }
  CustomPlan out;
  reinterpret_cast<PlanPluginFn>(sym)(&out.plan);
  if (out.plan.empty()) {
    throw UsageError(fmt::format("custom_parallel_plan '{}' ({}): {} returned an empty plan", ref, form, symbol));
  }
  out.origin = fmt::format("plugin {}:{}", path->string(), symbol);
  return out;
}

CustomPlan load_file_key(const std::string& ref, const std::vector<std::string>& dirs) {
  const auto colon = ref.rfind(':');
  const std::string file = ref.substr(0, colon), key = ref.substr(colon + 1);
  const std::string form = "file 'path/plan.py:name' or 'path/plan.yaml:name'";
  if (key.empty()) throw UsageError(fmt::format("custom_parallel_plan '{}' ({}): no key after ':'", ref, form));
  std::vector<std::string> tried;
  auto path = find_file(file, dirs, tried);
  if (!path) {
    throw UsageError(fmt::format("custom_parallel_plan '{}' ({}): file not found; looked at {}", ref, form,
                                 join(tried)));
  }
  return CustomPlan{plan_at_key(*path, key, form), fmt::format("{}:{}", path->string(), key)};
}

CustomPlan load_dotted(const std::string& ref, const std::vector<std::string>& dirs) {
  const std::string form = "dotted path 'a.b.c.name'";
  std::vector<std::string> parts;
  for (std::size_t start = 0;;) {
    const auto dot = ref.find('.', start);
    parts.push_back(ref.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  for (const auto& p : parts) {
    if (p.empty()) throw UsageError(fmt::format("custom_parallel_plan '{}' ({}): empty segment", ref, form));
  }
  if (parts.size() < 2) {
    throw UsageError(fmt::format("custom_parallel_plan '{}': not a plan reference. Use an inline mapping, "
                                 "'a.b.c.name' (file a/b/c.py or a/b/c.yaml, name), 'path/plan.py:name', 'path/plan.yaml:name' or "
                                 "'path/libplan.so:symbol'", ref));
  }
  std::vector<std::string> tried;
  std::vector<std::string> without_key;  // files found that do not define the name
  // Longest file path first: a.b.c.name -> a/b/c.py or a/b/c.yaml key name,
  // then a/b.yaml key c.name, ... At one path the Python module wins over
  // YAML and JSON, as the reference reads only .py files; a file without the
  // name is passed over.
  for (std::size_t n = parts.size() - 1; n >= 1; --n) {
    std::string rel, key;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      std::string& s = i < n ? rel : key;
      s += (s.empty() ? "" : (i < n ? "/" : ".")) + parts[i];
    }
    std::optional<PlanFile> chosen;
    std::vector<std::string> shadowed;
    for (const char* ext : {".py", ".yaml", ".yml", ".json"}) {
      // A Python module binds plain names only: a.b.py has no 'c.name'.
      if (std::string(ext) == ".py" && key.find('.') != std::string::npos) continue;
      auto path = find_file(rel + ext, dirs, tried);
      if (!path) continue;
      PlanFile file(*path);
      if (!file.has(key)) {
        without_key.push_back(fmt::format("{} (defines: {})", path->string(), join(file.keys())));
      } else if (!chosen) {
        chosen.emplace(std::move(file));
      } else {
        shadowed.push_back(path->filename().string());
      }
    }
    if (chosen) {
      const std::string note =
          shadowed.empty() ? "" : fmt::format("; {} also defines it and is not used: {} wins", join(shadowed),
                                              chosen->path.extension().string());
      return CustomPlan{chosen->plan(key), fmt::format("{} ({} '{}'{})", chosen->path.string(),
                                                        chosen->python ? "name" : "key", key, note)};
    }
  }
  if (!without_key.empty()) {
    throw UsageError(fmt::format("custom_parallel_plan '{}' ({}): no plan file defines '{}': {}", ref, form,
                                 parts.back(), join(without_key, "; ")));
  }
  throw UsageError(fmt::format("custom_parallel_plan '{}' ({}): no plan file found; looked at {}. Set "
                               "TESSEL_PLAN_PATH or give 'path/plan.py:name'", ref, form, join(tried)));
}

}  // namespace

std::vector<std::string> plan_search_dirs(const std::string& config_path) {
  std::vector<std::string> dirs;
  if (!config_path.empty()) {
    fs::path parent = fs::path(config_path).parent_path();
    dirs.push_back(parent.empty() ? "." : parent.string());
  }
  dirs.push_back(fs::current_path().string());
  if (const char* env = std::getenv("TESSEL_PLAN_PATH"); env && *env) {
    std::string s(env);
    for (std::size_t start = 0;;) {
      const auto colon = s.find(':', start);
      std::string d = s.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
      if (!d.empty()) dirs.push_back(d);
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  return dirs;
}

CustomPlan load_custom_plan(const config::CustomPlanSpec& spec, const std::string& config_path) {
  if (spec.is_inline()) return CustomPlan{plan_from_mapping(*spec.inline_plan, "the inline mapping"), "inline mapping"};
  const std::string& ref = spec.reference;
  const auto dirs = plan_search_dirs(config_path);
  const auto colon = ref.rfind(':');
  if (colon != std::string::npos) {
    const std::string file = ref.substr(0, colon);
    const bool plugin = file.ends_with(".so") || file.find(".so.") != std::string::npos || file.ends_with(".dylib");
    return plugin ? load_plugin(ref, dirs) : load_file_key(ref, dirs);
  }
  return load_dotted(ref, dirs);
}

}  // namespace tessel::parallel
