// The text of the current errno, for messages about a failed system call.
#pragma once

#include <string>

namespace tessel {

// std::strerror(errno), read at the call: call it before anything else can
// change errno.
std::string errno_text();

}  // namespace tessel
