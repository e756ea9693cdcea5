// Which tokens of a row each context-parallel rank holds (SPEC 2): the row is
// cut into 2·cp equal chunks and cp rank i holds chunks i and 2·cp-1-i, in
// that order. Under a causal mask a late chunk attends to many keys and an
// early one to few; pairing one of each gives every rank the same work.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace tessel::parallel {

// The length a row of `tokens` is padded to before it is cut: the next
// multiple of 2·cp (padding is never a target and never attended to; see
// train/context_batches.h). A row over one rank is not cut: `tokens`.
int64_t load_balanced_row_length(int64_t tokens, int cp_size);

// The index (0 .. 2·cp-1) of the row chunk that cp rank `rank` holds as its
// local chunk `local` (0 or 1).
int64_t load_balanced_chunk(int cp_size, int rank, int local);

// This rank's tokens of a full row: the two chunks of `x` along `dim`
// (whose length must be a multiple of 2·cp), concatenated, contiguous.
at::Tensor take_load_balanced_chunks(const at::Tensor& x, int64_t dim, int cp_size, int rank);

// The inverse over all ranks: `per_rank[r]` is rank r's take_..._chunks of a
// row; returns the row. For tests and tools that reassemble a sequence.
at::Tensor join_load_balanced_chunks(const std::vector<at::Tensor>& per_rank, int64_t dim);

}  // namespace tessel::parallel
