// Precompiled header: the heavy third-party headers most translation units
// use. Compiled once per build (see CMakeLists.txt); never include directly.
#pragma once
#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/custom_function.h>
#include <fmt/format.h>
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>
