// TESSEL_PROFILE_STEP=N: step N (counted from 1) of a training run on a GPU
// runs inside the device's profiler range (device/backend.h), so that a
// profiler started with collection off sees that one step whole and nothing
// else: `ncu --profile-from-start off` (bench/gpu/profile.sh, the
// per-kernel breakdown issue 40 asks of a step). The device finishes its
// queued work before the range opens and before it closes. On the CPU the
// setting does nothing (a warning says so).
#pragma once

#include <cstdint>
#include <optional>

namespace tessel::train {

// The step to profile, or none when unset or empty; tessel::UsageError for
// anything but a positive integer.
std::optional<int64_t> profile_step_from(const char* value);
std::optional<int64_t> profile_step_from_env();

}  // namespace tessel::train
