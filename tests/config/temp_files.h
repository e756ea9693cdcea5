// Test helpers: a fresh temporary directory that tests fill with small YAML
// files (inheritance needs real files on disk; support/temp_dir.h), removed at
// the end, and the message of an expected UsageError.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "support/temp_dir.h"

namespace tessel::config::test_util {

using test_support::TempDir;

// The message of the UsageError `fn` throws; fails the test if none is thrown.
template <typename Fn>
std::string usage_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const tessel::UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a tessel::UsageError";
  return "";
}

}  // namespace tessel::config::test_util
