// Where each parameter lives on the tp group after parallelize(): its global
// shape and tp placement (a tensor::ShardSpec with one "tp" placement), by
// fully qualified name ("model.layers.0.self_attn.q_proj.weight"). FSDP reads
// it to nest its own sharding under the tp placement; checkpoints read it to
// reassemble or re-slice full tensors.
//
// Packed (fused gate||up) weights are split per half: `packed_parts` = 2 means
// the tensor is `packed_parts` equal blocks along the sharded dim and each
// block is chunked over tp separately (this rank holds chunk r of every block,
// concatenated). A plain ShardSpec cannot say that, hence the extra field.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "dist/communicator.h"
#include "tensor/box_map.h"
#include "tensor/shard_spec.h"

namespace tessel::parallel {

struct TpParam {
  tensor::ShardSpec spec;
  int packed_parts = 1;
  std::string style;  // the style that placed it (for `tessel plan` and messages)
};

class ParamRegistry {
 public:
  // Records (or overwrites) a parameter's placement.
  void record(const std::string& name, TpParam param);
  bool contains(const std::string& name) const { return params_.count(name) != 0; }
  // Throws tessel::Error naming the closest recorded names when absent.
  const TpParam& at(const std::string& name) const;
  const std::map<std::string, TpParam>& all() const { return params_; }

 private:
  std::map<std::string, TpParam> params_;
};

// The tp placement name used in every ShardSpec recorded here.
inline constexpr const char* kTpMeshDim = "tp";

// Rebuilds the full tensor from this rank's local piece (no autograd; every
// rank of `group` must call it). Replicate returns `local` itself.
at::Tensor full_tensor(const at::Tensor& local, const TpParam& param, const dist::CommunicatorPtr& group);

// This rank's piece of a full tensor, as `param` places it (a new tensor).
at::Tensor local_piece(const at::Tensor& full, const TpParam& param, int tp_size, int tp_rank);

// The shape of tp rank `tp_rank`'s piece (pure arithmetic, no tensor).
std::vector<int64_t> local_piece_shape(const TpParam& param, int tp_size, int tp_rank);

// Where tp rank `tp_rank`'s piece sits in the full tensor: one box, or one per
// packed part (pure arithmetic; local_piece(full, ...) holds exactly these).
tensor::BoxMap local_piece_map(const TpParam& param, int tp_size, int tp_rank);

// The inverse of local_piece without communication: the full tensor from the
// pieces of every tp rank (pieces[r] = local_piece(full, param, size, r)).
// Checkpoints written at one tp size use it to reload at another.
at::Tensor join_pieces(const std::vector<at::Tensor>& pieces, const TpParam& param);

// Whether `param` is split over tp (Shard), not replicated.
bool is_tp_sharded(const TpParam& param);

}  // namespace tessel::parallel
