// A duration a user sets in seconds through an environment variable
// (TESSEL_COLLECTIVE_TIMEOUT_S, TESSEL_RUN_ABORT_GRACE_S): fractions allowed,
// anything else refused with the value and the default named.
#pragma once

#include <chrono>

namespace tessel {

// `name`'s value in seconds (rounded up to a millisecond), or `fallback`
// when unset or empty. tessel::UsageError for a value that is not a positive
// number of seconds.
std::chrono::milliseconds seconds_from_env(const char* name, std::chrono::milliseconds fallback);

}  // namespace tessel
