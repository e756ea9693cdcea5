#include "core/errno_text.h"

#include <cerrno>
#include <cstring>

namespace tessel {

std::string errno_text() { return std::strerror(errno); }

}  // namespace tessel
