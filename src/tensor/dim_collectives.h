// Collectives along one dimension of a tensor, without autograd: the building
// blocks of the autograd collectives and of redistribute (and usable by FSDP
// and checkpoint code that moves plain tensors).
//
// The communicator moves equal-size flat buffers only, so shards of unequal
// size along `dim` are padded to the largest one, exchanged flat, and unpadded.
// A tensor is viewed as [A, n, B] (A = product of the dims before `dim`, B of
// those after), which needs no movedim: an all-gather along dim 0 of equal
// shards copies nothing beyond the collective itself, other cases copy once on
// each side. `sizes` lists every rank's extent along `dim` (group-rank order);
// all other dims must be equal on every rank, as must the dtype.
//
// Results never alias the input except where noted (world size 1 returns the
// input unchanged); results are contiguous.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "dist/communicator.h"

namespace tessel::tensor {

// Each rank holds sizes[rank] elements along dim; returns the concatenation of
// all ranks' tensors along dim (sum(sizes) elements).
at::Tensor all_gather_dim(const at::Tensor& x, int64_t dim, dist::Communicator& group,
                          const std::vector<int64_t>& sizes);

// Every rank holds the full extent sum(sizes) along dim; returns this rank's
// slice [offset, offset + sizes[rank]) of the SUM over ranks.
at::Tensor reduce_scatter_dim(const at::Tensor& x, int64_t dim, dist::Communicator& group,
                              const std::vector<int64_t>& sizes);

// SUM over ranks, as a new tensor (the input is left untouched).
at::Tensor all_reduce_sum(const at::Tensor& x, dist::Communicator& group);

// Re-shards from src_dim to dst_dim: rank r holds src_sizes[r] elements along
// src_dim and the full sum(dst_sizes) along dst_dim; it ends with the full
// sum(src_sizes) along src_dim and dst_sizes[r] along dst_dim. One all-to-all.
at::Tensor all_to_all_dim(const at::Tensor& x, int64_t src_dim, const std::vector<int64_t>& src_sizes,
                          int64_t dst_dim, const std::vector<int64_t>& dst_sizes,
                          dist::Communicator& group);

}  // namespace tessel::tensor
