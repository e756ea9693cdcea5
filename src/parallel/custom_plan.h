// Loading `custom_parallel_plan` (SPEC 3, priority 1) in its four forms:
//   inline mapping        pattern -> style string, written in the config;
//   a.b.c.name            like a Python import: the module a/b/c.py (read as
//                         data, python_plan.h) and its name `name`, or the
//                         file a/b/c.yaml (or .yml, .json) and its top-level
//                         key `name`; when several of these exist and define
//                         the name, .py wins, then .yaml, .yml, .json (the
//                         origin says which was passed over). Shorter YAML
//                         files with a dotted key path are tried too
//                         (a/b.yaml, `c.name`);
//   path/plan.py:name,
//   path/plan.yaml:name   that file, the name / key `name` (a dotted key path
//                         in YAML);
//   path/libplan.so:sym   a compiled plugin: dlopen, then
//                         `extern "C" void sym(tessel::parallel::Plan*)`.
// Relative files are searched in the config file's directory, the working
// directory, then each directory of TESSEL_PLAN_PATH (':'-separated). The
// reference is the user's (the run's config), so a file form may name a file
// anywhere, as `defaults:` may (config/loader.h); a dotted path cannot climb
// with '..' (its segments would be empty, which is refused). Errors
// (tessel::UsageError) say which form was tried, where it looked and what was
// wrong.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "config/parallelism_config.h"
#include "parallel/plan.h"
#include "parallel/plan_mapping.h"  // plan_from_mapping, for callers of this header

namespace tessel::parallel {

struct CustomPlan {
  Plan plan;
  std::string origin;  // "inline mapping", "examples/custom_parallel/custom_parallel.yaml:custom_parallel_plan", ...
};

// config_path: the config file the reference came from ("" if none).
CustomPlan load_custom_plan(const config::CustomPlanSpec& spec, const std::string& config_path);

// Where relative plan files are looked for, in order.
std::vector<std::string> plan_search_dirs(const std::string& config_path);

}  // namespace tessel::parallel
