#include "parallel/plan_mapping.h"

#include <fmt/format.h>

#include "core/error.h"

namespace tessel::parallel {

Plan plan_from_mapping(const config::Config& mapping, const std::string& where) {
  if (!mapping.is_map() || mapping.size() == 0) {
    throw UsageError(fmt::format("custom parallel plan at {} must be a non-empty mapping of module pattern -> "
                                 "style string, got {}", where, mapping.to_flow()));
  }
  Plan plan;
  for (const auto& [pattern, style] : mapping.entries()) {
    if (style.kind() != config::Kind::String) {
      throw UsageError(fmt::format("custom parallel plan at {}: the style of '{}' must be a string such as "
                                   "'colwise', got {}", where, pattern, style.to_flow()));
    }
    plan.add(pattern, style.as_string());
  }
  return plan;
}

}  // namespace tessel::parallel
