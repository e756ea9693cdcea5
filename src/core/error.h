// Errors a user can act on. Every failure in tessel that is caused by input
// (config, files, layouts) or by the environment (a dead peer) throws
// tessel::Error with a message that says what was wrong, which value, and what
// to do. TESSEL_CHECK adds file:line so the engineer can find the check.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace tessel {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// Configuration and command-line mistakes: the CLI maps these to exit code 2.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& message) : Error(message) {}
};

namespace detail {
[[noreturn]] void throw_check_failure(const char* file, int line, const char* condition,
                                      const std::string& message);
}  // namespace detail

}  // namespace tessel

// TESSEL_CHECK(cond, "format {}", args...) throws tessel::Error when cond is false.
#define TESSEL_CHECK(cond, ...)                                                         \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      ::tessel::detail::throw_check_failure(__FILE__, __LINE__, #cond,                  \
                                            ::fmt::format(__VA_ARGS__));                \
    }                                                                                   \
  } while (0)
