// Text for error messages: tensor shapes as "[4096, 1024]".
#pragma once

#include <c10/util/ArrayRef.h>
#include <fmt/format.h>

#include <cstdint>
#include <string>

namespace tessel::nn {

inline std::string shape_string(c10::IntArrayRef sizes) {
  return fmt::format("[{}]", fmt::join(sizes.begin(), sizes.end(), ", "));
}

}  // namespace tessel::nn
