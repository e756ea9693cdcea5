// A plan written as a mapping of module pattern -> HF style string: the
// inline form of custom_parallel_plan and the YAML/JSON plan files (SPEC 3).
// Free of libtorch, like plan.h, so the plan-file fuzz target builds it.
#pragma once

#include <string>

#include "config/config.h"
#include "parallel/plan.h"

namespace tessel::parallel {

// tessel::UsageError naming `where` unless `mapping` is a non-empty mapping
// whose values are strings.
Plan plan_from_mapping(const config::Config& mapping, const std::string& where);

}  // namespace tessel::parallel
