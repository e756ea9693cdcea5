// Copying tensor bytes out of a memory-mapped file. Reads of large tensors
// are bound by page faults on the mapping, so big copies are split across
// the intra-op threads; strided copies gather one slice of every row (how a
// tensor-parallel rank reads its columns of a weight).
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessel::io {

// dst[r * chunk : (r + 1) * chunk] = src[r * src_stride : r * src_stride + chunk]
// for r in [0, rows). dst is contiguous; chunk <= src_stride unless rows == 1.
void copy_rows(std::byte* dst, const std::byte* src, uint64_t rows, uint64_t chunk,
               uint64_t src_stride);

}  // namespace tessel::io
