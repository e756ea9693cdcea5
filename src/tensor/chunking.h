// How a dimension of n elements is split over `world` ranks, following
// torch.chunk: every chunk has ceil(n / world) elements except the trailing
// ones, which may be short or EMPTY (n=5, world=4 -> 2,2,1,0; n=2, world=3 ->
// 1,1,0). Tensor parallelism, redistribution and FSDP all shard this way, so a
// tensor sharded by one unit can be read back by another.
#pragma once

#include <cstdint>
#include <vector>

namespace tessel::tensor {

// ceil(n / world): the size of the first (largest) chunk; the padded size every
// rank's buffer has in a flat collective.
int64_t max_chunk(int64_t n, int world);

// Size of rank's chunk (0 <= rank < world).
int64_t chunk_size(int64_t n, int world, int rank);

// Index of the first element of rank's chunk; equals n for empty trailing chunks.
int64_t chunk_offset(int64_t n, int world, int rank);

// All chunk sizes, rank order; they sum to n.
std::vector<int64_t> chunk_sizes(int64_t n, int world);

}  // namespace tessel::tensor
