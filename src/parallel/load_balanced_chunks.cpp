#include "parallel/load_balanced_chunks.h"

#include <ATen/ATen.h>

#include "core/error.h"

namespace tessel::parallel {

int64_t load_balanced_row_length(int64_t tokens, int cp_size) {
  TESSEL_CHECK(cp_size > 0 && tokens >= 0, "load_balanced_row_length: {} tokens over {} cp ranks", tokens, cp_size);
  if (cp_size == 1) return tokens;
  const int64_t chunks = 2 * static_cast<int64_t>(cp_size);
  return (tokens + chunks - 1) / chunks * chunks;
}

int64_t load_balanced_chunk(int cp_size, int rank, int local) {
  TESSEL_CHECK(cp_size > 0 && rank >= 0 && rank < cp_size && (local == 0 || local == 1),
               "load_balanced_chunk: rank {} local chunk {} of a cp group of {}", rank, local, cp_size);
  return local == 0 ? rank : 2 * cp_size - 1 - rank;
}

at::Tensor take_load_balanced_chunks(const at::Tensor& x, int64_t dim, int cp_size, int rank) {
  const int64_t length = x.size(dim);
  TESSEL_CHECK(length % (2 * cp_size) == 0,
               "context parallelism over {} ranks cuts a row into {} chunks, but it has {} tokens; pad it "
               "to a multiple of {}",
               cp_size, 2 * cp_size, length, 2 * cp_size);
  const int64_t chunk = length / (2 * cp_size);
  return at::cat({x.narrow(dim, load_balanced_chunk(cp_size, rank, 0) * chunk, chunk),
                  x.narrow(dim, load_balanced_chunk(cp_size, rank, 1) * chunk, chunk)},
                 dim);
}

at::Tensor join_load_balanced_chunks(const std::vector<at::Tensor>& per_rank, int64_t dim) {
  const int cp_size = static_cast<int>(per_rank.size());
  TESSEL_CHECK(cp_size > 0, "join_load_balanced_chunks: no ranks");
  const int64_t chunk = per_rank[0].size(dim) / 2;
  std::vector<at::Tensor> chunks(static_cast<size_t>(2 * cp_size));
  for (int r = 0; r < cp_size; ++r) {
    TESSEL_CHECK(per_rank[r].size(dim) == 2 * chunk, "join_load_balanced_chunks: rank {} holds {} tokens, rank 0 {}",
                 r, per_rank[r].size(dim), 2 * chunk);
    for (int local = 0; local < 2; ++local) {
      chunks[static_cast<size_t>(load_balanced_chunk(cp_size, r, local))] = per_rank[r].narrow(dim, local * chunk, chunk);
    }
  }
  return at::cat(chunks, dim);
}

}  // namespace tessel::parallel
