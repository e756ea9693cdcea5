// A box (a sub-block at `offset` of shape `box`) of a row-major tensor stored
// contiguously in a file, as the runs of bytes that reading or writing it
// moves: rows along `row_dim`, each a contiguous run of the file over the
// dims after it. row_dim is the dim just outside the innermost one the box
// does not span whole (dim 0 when only dim 0 is partial, or none), so a box
// that spans the trailing dims moves in as few, as long runs as it can. The
// dims up to row_dim are walked one index at a time by the caller.
// SafetensorsFile::read_box_into and HfExportWriter::write_piece share it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessel::io {

struct BoxRows {
  std::vector<uint64_t> stride;  // bytes between neighbours along each dim of the file tensor
  size_t row_dim = 0;
  uint64_t run = 0;  // bytes of one row: contiguous in the file
  uint64_t inner =
      0;  // where a row starts past its dims up to row_dim (the box's offset in the dims after)
};

// `tensor` and `box` have the same rank (at least 1); the box lies inside.
inline BoxRows box_rows(const std::vector<int64_t>& tensor, const std::vector<int64_t>& offset,
                        const std::vector<int64_t>& box, uint64_t itemsize) {
  const size_t rank = tensor.size();
  BoxRows r;
  r.stride.assign(rank, itemsize);
  for (size_t d = rank; d-- > 1;) r.stride[d - 1] = r.stride[d] * static_cast<uint64_t>(tensor[d]);
  size_t innermost_partial = rank - 1;
  while (innermost_partial > 0 && box[innermost_partial] == tensor[innermost_partial])
    --innermost_partial;
  r.row_dim = innermost_partial > 0 ? innermost_partial - 1 : 0;
  r.run = itemsize;
  for (size_t d = r.row_dim + 1; d < rank; ++d) {
    r.run *= static_cast<uint64_t>(box[d]);
    r.inner += static_cast<uint64_t>(offset[d]) * r.stride[d];
  }
  return r;
}

}  // namespace tessel::io
