#include "core/error.h"

#include <cstring>

namespace tessel::detail {

void throw_check_failure(const char* file, int line, const char* condition,
                         const std::string& message) {
  const char* base = std::strrchr(file, '/');
  throw Error(fmt::format("{} [{}:{}: check '{}' failed]", message, base ? base + 1 : file,
                          line, condition));
}

}  // namespace tessel::detail
