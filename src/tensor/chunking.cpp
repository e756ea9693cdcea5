#include "tensor/chunking.h"

#include <algorithm>

#include "core/error.h"

namespace tessel::tensor {

namespace {
void check_args(int64_t n, int world) {
  TESSEL_CHECK(n >= 0, "cannot chunk a dimension of negative size {}", n);
  TESSEL_CHECK(world >= 1, "cannot chunk over a group of {} ranks (need >= 1)", world);
}
}  // namespace

int64_t max_chunk(int64_t n, int world) {
  check_args(n, world);
  return (n + world - 1) / world;
}

int64_t chunk_offset(int64_t n, int world, int rank) {
  TESSEL_CHECK(rank >= 0 && rank < world, "rank {} is outside a group of {} ranks", rank, world);
  return std::min(n, max_chunk(n, world) * rank);
}

int64_t chunk_size(int64_t n, int world, int rank) {
  const int64_t begin = chunk_offset(n, world, rank);
  return std::min(n, begin + max_chunk(n, world)) - begin;
}

std::vector<int64_t> chunk_sizes(int64_t n, int world) {
  check_args(n, world);
  std::vector<int64_t> sizes(static_cast<size_t>(world));
  for (int r = 0; r < world; ++r) sizes[static_cast<size_t>(r)] = chunk_size(n, world, r);
  return sizes;
}

}  // namespace tessel::tensor
