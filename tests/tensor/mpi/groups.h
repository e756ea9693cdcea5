// Groups the tensor-layer MPI tests run on: the world, and a split into ranks
// of equal parity, so group ranks differ from world ranks (and at 3 ranks one
// group has a single member). Every rank must call groups() at the same point.
#pragma once

#include <vector>

#include "dist/communicator.h"

namespace tessel::tensor::ref {

inline const std::vector<dist::CommunicatorPtr>& groups() {
  static const std::vector<dist::CommunicatorPtr> all = [] {
    auto world = dist::world();
    return std::vector<dist::CommunicatorPtr>{world, world->split(world->rank() % 2, world->rank(), "parity")};
  }();
  return all;
}

}  // namespace tessel::tensor::ref
