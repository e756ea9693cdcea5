#include "train/profiled_step.h"

#include <cstdlib>
#include <string>

#include "core/error.h"

namespace tessel::train {

std::optional<int64_t> profile_step_from(const char* value) {
  const std::string text = value != nullptr ? value : "";
  if (text.empty()) return std::nullopt;
  std::size_t used = 0;
  long long step = 0;
  try {
    step = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || step < 1)
    throw UsageError(fmt::format("TESSEL_PROFILE_STEP='{}': give the step to profile, counted from 1 "
                                 "(e.g. 3: after the first steps' warm-up)",
                                 text));
  return step;
}

std::optional<int64_t> profile_step_from_env() { return profile_step_from(std::getenv("TESSEL_PROFILE_STEP")); }

}  // namespace tessel::train
