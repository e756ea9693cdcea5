#include "fsdp/fsdp_param_group.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "dist/node_shared_memory.h"
#include "fsdp/fsdp_collectives.h"
#include "nn/module.h"

namespace tessel::fsdp {

FSDPParamGroup::FSDPParamGroup(std::string name, std::vector<std::unique_ptr<FSDPParam>> params,
                               const std::vector<at::Tensor>& originals, FSDPMesh mesh,
                               const FSDPOptions& options)
    : name_(std::move(name)),
      params_(std::move(params)),
      mesh_(std::move(mesh)),
      world_(mesh_.shard_size()) {
  TESSEL_CHECK(params_.size() == originals.size(), "FSDP: {} params but {} originals",
               params_.size(), originals.size());
  const auto& mp = options.mp_policy;
  param_dtype_ = mp.param_dtype.value_or(at::kFloat);
  reduce_dtype_ = mp.reduce_dtype.value_or(param_dtype_);
  TESSEL_CHECK(at::isFloatingType(param_dtype_) && at::isFloatingType(reduce_dtype_),
               "fully_shard({}): param_dtype and reduce_dtype must be floating types", name_);

  if (const bool* reshard = std::get_if<bool>(&options.reshard_after_forward)) {
    post_forward_mode_ = *reshard ? PostForward::Reshard : PostForward::Keep;
  } else {
    const int k = std::get<int>(options.reshard_after_forward);
    if (k < 1 || world_ % k != 0) {
      throw UsageError(fmt::format(
          "fully_shard({}): reshard_after_forward = {} must divide the shard group size {} "
          "(or be true / false)",
          name_, k, world_));
    }
    post_forward_mode_ = k == 1        ? PostForward::Keep
                         : k == world_ ? PostForward::Reshard
                                       : PostForward::KeepSlice;
    if (post_forward_mode_ == PostForward::KeepSlice)
      post_forward_comm_ = mesh_.post_forward_group(k);
  }

  for (auto& p : params_) {
    p->set_shard_offset(local_numel_);
    local_numel_ += p->padded_shard_numel();
    shard_numels_.push_back(p->padded_shard_numel());
    param_ptrs_.push_back(p.get());
  }
  if (options.node_shared_params && !mesh_.device().is_cpu()) {
    throw UsageError(
        fmt::format("fully_shard({}): node_shared_params shares host memory between the ranks of a "
                    "machine; these ranks compute on {}: leave it false",
                    name_, mesh_.device().str()));
  }
  if (options.node_shared_params && std::holds_alternative<int>(options.reshard_after_forward)) {
    throw UsageError(fmt::format(
        "fully_shard({}): node_shared_params keeps the parameters on the node for the whole step; "
        "reshard_after_forward = {} (a slice kept over a subgroup) does not apply: leave it true",
        name_, std::get<int>(options.reshard_after_forward)));
  }
  at::NoGradGuard no_grad;
  // A one-rank group in fp32 computes on its shards: its padded layout is the
  // unsharded layout (no padding over one rank), so the all-gather would be a
  // copy of the same bytes. A node-shared group's unsharded buffer is memory
  // its shard group maps for the group's lifetime; in fp32 its rows are the
  // shards themselves (each rank's sharded params alias its own rows), so a
  // rank holds no shard memory of its own and nothing is copied to publish.
  // Otherwise the unsharded buffer gets memory only while unsharded.
  computes_on_shards_ = world_ == 1 && param_dtype_ == at::kFloat;
  node_shared_ = options.node_shared_params && world_ > 1;
  shards_in_node_copy_ = node_shared_ && param_dtype_ == at::kFloat;
  split_over_replicas_ = options.shard_optimizer_over_replicas && mesh_.is_hybrid();
  if (split_over_replicas_) {
    if (options.node_shared_params) {
      throw UsageError(fmt::format("fully_shard({}): shard_optimizer_over_replicas and node_shared_params "
                                   "cannot be combined: set one of them to false",
                                   name_));
    }
    for (const at::Tensor& original : originals) {
      // A frozen parameter inside a part would be decayed by the update.
      if (!original.requires_grad()) {
        throw UsageError(fmt::format("fully_shard({}): shard_optimizer_over_replicas updates whole groups; "
                                     "this group has frozen parameters",
                                     name_));
      }
    }
    // One buffer for the shards and the zero tail that makes R equal parts:
    // the replicate all-gather writes the parts back in place.
    const int replicas = mesh_.replicate_size();
    part_numel_ = (local_numel_ + replicas - 1) / replicas;
    replica_flat_ = new_shard_storage(replicas * part_numel_, mesh_.device());
    local_flat_ = replica_flat_.narrow(0, 0, local_numel_);
    replica_part_ = alias_leaf(replica_flat_, mesh_.replicate()->rank() * part_numel_, {part_numel_});
    replica_part_.set_requires_grad(true);
  } else if (!shards_in_node_copy_) {
    local_flat_ = new_shard_storage(local_numel_, mesh_.device());
  }
  if (node_shared_) {
    post_forward_mode_ = PostForward::Keep;
    const int64_t numel = world_ * local_numel_;
    c10::DataPtr memory =
        dist::allocate_node_shared(*mesh_.shard(), static_cast<size_t>(numel) * c10::elementSize(param_dtype_),
                                   fmt::format("fully_shard({}) with node_shared_params", name_));
    // Holding the shards, it carries their mark (is_shard_storage).
    if (shards_in_node_copy_) memory = mark_as_shard_storage(std::move(memory));
    unsharded_flat_ = flat_tensor_over(std::move(memory), numel, param_dtype_);
    // This rank's share of the node's copy, where it is not the shards.
    if (!shards_in_node_copy_) track_alloc(Buffer::UnshardedParams, tensor_bytes(unsharded_flat_) / world_);
  } else {
    unsharded_flat_ =
        computes_on_shards_
            ? local_flat_
            : unallocated_flat(world_ * local_numel_,
                               at::TensorOptions().dtype(param_dtype_).device(mesh_.device()));
  }
  const int rank = mesh_.shard()->rank();
  for (size_t i = 0; i < params_.size(); ++i) {
    FSDPParam& p = *params_[i];
    if (shards_in_node_copy_) {
      p.init_sharded(unsharded_flat_, p.unsharded_offset(world_, rank), originals[i]);
    } else {
      p.init_sharded(local_flat_, p.shard_offset(), originals[i]);
    }
    p.init_unsharded(unsharded_flat_, world_);
    p.sharded_param().set_requires_grad(originals[i].requires_grad());
    p.unsharded_param().set_requires_grad(originals[i].requires_grad());
  }
}

at::Tensor FSDPParamGroup::new_buffer(int64_t numel, at::ScalarType dtype) const {
  return pool_ ? pool_->empty(numel, dtype)
               : at::empty({numel}, at::TensorOptions().dtype(dtype).device(mesh_.device()));
}

const dist::CommunicatorPtr& FSDPParamGroup::post_forward_group() const {
  return post_forward_comm_ ? post_forward_comm_ : mesh_.shard();
}

void FSDPParamGroup::set_memory_tracker(std::shared_ptr<MemoryTracker> tracker) {
  for (Buffer kind : {Buffer::UnshardedParams, Buffer::Gradients}) {
    const int64_t live = memory_->current(kind);
    memory_->freed(kind, live);
    tracker->allocated(kind, live);
  }
  memory_ = std::move(tracker);
}

void FSDPParamGroup::set_training_state(TrainingState next) {
  check_transition(name_, training_state_, next);
  training_state_ = next;
}

void FSDPParamGroup::set_sharded_state(ShardedState next) {
  check_transition(name_, sharded_state_, next);
  sharded_state_ = next;
}

// --- unshard / reshard -------------------------------------------------------

void FSDPParamGroup::publish_own_rows() {
  TESSEL_CHECK(node_shared_, "fully_shard({}): publish_own_rows without node-shared parameters", name_);
  if (!shards_in_node_copy_) {
    at::NoGradGuard no_grad;
    const int rank = mesh_.shard()->rank();
    for (const FSDPParam* p : param_ptrs_) {
      const int64_t rows = p->padded_shard_numel();
      unsharded_flat_.narrow(0, p->unsharded_offset(world_, rank), rows)
          .copy_(local_flat_.narrow(0, p->shard_offset(), rows));
    }
  }
  set_sharded_state(ShardedState::Unsharded);
}

void FSDPParamGroup::unshard() {
  wait_for_replica_parts();  // the shards are complete again only then
  if (sharded_state_ == ShardedState::Unsharded || in_flight_) return;
  if (computes_on_shards_ || node_shared_) {
    set_sharded_state(ShardedState::Unsharded);
    return;
  }
  at::NoGradGuard no_grad;
  if (sharded_state_ == ShardedState::ShardedPostForward) {
    // Re-gather the slices kept after forward straight into the unsharded buffer.
    alloc_storage(unsharded_flat_, pool_.get());
    track_alloc(Buffer::UnshardedParams, unsharded_param_bytes());
    auto work = post_forward_comm_->all_gather_into_async(unsharded_flat_, post_forward_slice_);
    in_flight_ = InFlight{std::move(work), post_forward_slice_, true};
    return;
  }
  // Each parameter's shards are gathered straight into its unsharded rows
  // (fsdp_collectives.h): the buffer gets its memory now, and nothing is
  // copied once the gather is done.
  at::Tensor input = param_dtype_ == at::kFloat ? local_flat_ : local_flat_.to(param_dtype_);
  alloc_storage(unsharded_flat_, pool_.get());
  track_alloc(Buffer::UnshardedParams, unsharded_param_bytes() + cast_bytes(input));
  auto work = mesh_.shard()->all_gather_segments_async(unsharded_flat_, input, shard_numels_);
  in_flight_ = InFlight{std::move(work), std::move(input), false};
}

void FSDPParamGroup::wait_for_unshard() {
  if (!in_flight_) return;
  at::NoGradGuard no_grad;
  InFlight op = std::move(*in_flight_);
  in_flight_.reset();
  op.work->wait();
  if (op.from_post_forward_slice) {
    track_free(Buffer::UnshardedParams, tensor_bytes(post_forward_slice_));
    post_forward_slice_ = at::Tensor();
  } else {
    track_free(Buffer::UnshardedParams, cast_bytes(op.input));
  }
  set_sharded_state(ShardedState::Unsharded);
}

void FSDPParamGroup::reshard() {
  wait_for_unshard();
  if (sharded_state_ == ShardedState::Unsharded && !computes_on_shards_ && !node_shared_) {
    free_storage(unsharded_flat_);
    track_free(Buffer::UnshardedParams, unsharded_param_bytes());
  }
  if (sharded_state_ == ShardedState::ShardedPostForward) {
    track_free(Buffer::UnshardedParams, tensor_bytes(post_forward_slice_));
    post_forward_slice_ = at::Tensor();
  }
  set_sharded_state(ShardedState::Sharded);
}

void FSDPParamGroup::post_forward_reshard() {
  if (post_forward_mode_ == PostForward::Keep) return;
  if (post_forward_mode_ == PostForward::Reshard) {
    reshard();
    return;
  }
  wait_for_unshard();
  // Checked before the slice is cut from what must be unsharded data.
  check_transition(name_, sharded_state_, ShardedState::ShardedPostForward);
  at::NoGradGuard no_grad;
  const int64_t piece = world_ * local_numel_ / post_forward_comm_->size();
  post_forward_slice_ =
      unsharded_flat_.narrow(0, post_forward_comm_->rank() * piece, piece).clone();
  track_alloc(Buffer::UnshardedParams, tensor_bytes(post_forward_slice_));
  free_storage(unsharded_flat_);
  track_free(Buffer::UnshardedParams, unsharded_param_bytes());
  set_sharded_state(ShardedState::ShardedPostForward);
}

void FSDPParamGroup::use_unsharded_params() {
  for (FSDPParam* p : param_ptrs_) {
    for (auto& r : p->registrations()) r.module->replace_parameter(r.name, p->unsharded_param());
  }
}

void FSDPParamGroup::use_sharded_params() {
  for (FSDPParam* p : param_ptrs_) {
    for (auto& r : p->registrations()) r.module->replace_parameter(r.name, p->sharded_param());
  }
}

// --- gradients -----------------------------------------------------------------

void FSDPParamGroup::post_backward() {
  at::NoGradGuard no_grad;
  set_training_state(TrainingState::PostBackward);
  std::vector<at::Tensor> grads;
  grads.reserve(param_ptrs_.size());
  for (FSDPParam* p : param_ptrs_) {
    at::Tensor& slot = p->unsharded_param().mutable_grad();
    grads.push_back(slot);
    slot = at::Tensor();
  }
  if (!requires_gradient_sync) {
    // Microbatch without reduction: keep the full gradients (reduce dtype).
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) continue;
      at::Tensor& acc = param_ptrs_[i]->unsharded_accumulated_grad;
      if (acc.defined()) {
        acc.add_(grads[i]);
      } else {
        acc = grads[i].to(reduce_dtype_, /*non_blocking=*/false, /*copy=*/true);
        track_alloc(Buffer::Gradients, tensor_bytes(acc));
      }
    }
    reshard();
    return;
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    at::Tensor& acc = param_ptrs_[i]->unsharded_accumulated_grad;
    if (!acc.defined()) continue;
    if (grads[i].defined()) acc.add_(grads[i]);
    track_free(Buffer::Gradients, tensor_bytes(acc));  // now one of the grads, freed once packed
    grads[i] = acc;
    acc = at::Tensor();
  }
  // The unsharded parameters are not needed any more: free them before the
  // packed buffer is allocated, so the two never coexist.
  reshard();
  if (world_ == 1 && !mesh_.is_hybrid()) {
    // Over one rank the reduction is the identity: the gradients become the
    // sharded .grad as they are, with no packed copy.
    const int64_t divide = mesh_.gradient_divide_factor();
    for (auto& g : grads) {
      if (!g.defined()) continue;
      g = g.to(at::kFloat);
      if (divide != 1) g.div_(static_cast<double>(divide));
    }
    apply_to_sharded_grads(grads);
    return;
  }
  at::Tensor packed = new_buffer(world_ * local_numel_, reduce_dtype_);
  pack_for_reduce_scatter(param_ptrs_, grads, world_, local_numel_, packed);
  grads.clear();
  // Over one rank the reduce-scatter leaves the data where it is: reduce in
  // place. Split over replicas, the output is the [R*P] buffer the
  // replicate reduce-scatter splits (its tail zero).
  at::Tensor output;
  if (split_over_replicas_) {
    output = at::empty({mesh_.replicate_size() * part_numel_}, packed.options());
    output.narrow(0, local_numel_, output.numel() - local_numel_).zero_();
  } else {
    output = world_ == 1 ? packed : at::empty({local_numel_}, packed.options());
  }
  track_alloc(Buffer::Gradients, tensor_bytes(packed) + (output.is_same(packed) ? 0 : tensor_bytes(output)));
  auto work = mesh_.shard()->reduce_scatter_from_async(
      split_over_replicas_ ? output.narrow(0, 0, local_numel_) : output, packed, dist::ReduceOp::Sum);
  pending_ = PendingReduce{std::move(work), std::move(packed), std::move(output), nullptr, at::Tensor(), false};
}

void FSDPParamGroup::finish_reduce_scatter() {
  if (!pending_) return;
  if (!pending_->reduce_scatter) {
    release_replica_reduce_input();
    return;
  }
  at::NoGradGuard no_grad;
  pending_->reduce_scatter->wait();
  pending_->reduce_scatter = nullptr;
  // Over one rank (without the split) the output is the packed buffer itself.
  if (!pending_->packed.is_same(pending_->output)) track_free(Buffer::Gradients, tensor_bytes(pending_->packed));
  pending_->packed = at::Tensor();
  if (!mesh_.is_hybrid()) {
    pending_->apply = true;
    return;
  }
  if (partial_reduce_output_.defined()) {
    pending_->output.add_(partial_reduce_output_);
    track_free(Buffer::Gradients, tensor_bytes(partial_reduce_output_));
    partial_reduce_output_ = at::Tensor();
  }
  if (requires_all_reduce && split_over_replicas_) {
    pending_->part = at::empty({part_numel_}, pending_->output.options());
    track_alloc(Buffer::Gradients, tensor_bytes(pending_->part));
    pending_->all_reduce =
        mesh_.replicate()->reduce_scatter_from_async(pending_->part, pending_->output, dist::ReduceOp::Sum);
    pending_->apply = true;
  } else if (requires_all_reduce) {
    pending_->all_reduce =
        mesh_.replicate()->all_reduce_async(pending_->output, dist::ReduceOp::Sum);
    pending_->apply = true;
  } else {
    // HSDP accumulation: reduce-scattered now, all-reduced on a later microbatch.
    partial_reduce_output_ = pending_->output;
    pending_->apply = false;
  }
}

void FSDPParamGroup::release_replica_reduce_input() {
  // Split over replicas, the [R*P] reduce-scattered shards are only the
  // replicate reduce-scatter's input: once it is done (tested, not waited;
  // finish_all_reduce still waits, for its error) they need not live until
  // the final callback, which would hold every group's at once.
  if (!split_over_replicas_ || !pending_->all_reduce || !pending_->output.defined() ||
      !pending_->all_reduce->is_completed()) {
    return;
  }
  track_free(Buffer::Gradients, tensor_bytes(pending_->output));
  pending_->output = at::Tensor();
}

void FSDPParamGroup::finish_all_reduce() {
  if (!pending_) return;
  finish_reduce_scatter();
  at::NoGradGuard no_grad;
  PendingReduce op = std::move(*pending_);
  pending_.reset();
  if (op.all_reduce) op.all_reduce->wait();
  if (!op.apply) return;  // kept as partial_reduce_output_ (still counted)
  if (split_over_replicas_) {
    // This replica's part of the reduced shards becomes the part's .grad.
    track_free(Buffer::Gradients, tensor_bytes(op.output) + tensor_bytes(op.part));
    op.output = at::Tensor();
    at::Tensor reduced = op.part.to(at::kFloat);
    const int64_t divide = mesh_.gradient_divide_factor();
    if (divide != 1) reduced.div_(static_cast<double>(divide));
    at::Tensor& slot = replica_part_.mutable_grad();
    if (slot.defined()) {
      slot.add_(reduced);
    } else {
      slot = reduced;
    }
    return;
  }
  // The reduced buffer becomes the sharded gradients: each .grad is a view of
  // it (no copy), or, on a later microbatch, what is added into them.
  at::Tensor reduced = op.output.to(at::kFloat);
  const int64_t divide = mesh_.gradient_divide_factor();
  if (divide != 1) reduced.div_(static_cast<double>(divide));
  std::vector<at::Tensor> shards;
  for (FSDPParam* p : param_ptrs_) shards.push_back(shard_view(*p, reduced));
  apply_to_sharded_grads(shards);
  track_free(Buffer::Gradients, tensor_bytes(op.output));
}

void FSDPParamGroup::apply_to_sharded_grads(const std::vector<at::Tensor>& grads) {
  for (size_t i = 0; i < param_ptrs_.size(); ++i) {
    const at::Tensor& sharded = param_ptrs_[i]->sharded_param();
    if (!sharded.requires_grad() || !grads[i].defined()) continue;
    TESSEL_CHECK(grads[i].sizes() == sharded.sizes(), "FSDP: gradient of '{}' has the wrong shape",
                 param_ptrs_[i]->fqn());
    at::Tensor& slot = sharded.mutable_grad();
    if (slot.defined()) {
      slot.add_(grads[i]);
    } else {
      slot = grads[i].contiguous();  // no copy when it already is
    }
  }
}

void FSDPParamGroup::gather_replica_parts() {
  if (!split_over_replicas_ || replica_gather_) return;
  at::NoGradGuard no_grad;
  // In place: this replica's part is its own slot of the buffer. In order
  // and in pieces: the groups' gathers are issued one after another as the
  // optimizer updates them, and the next forward needs them in that order;
  // posted as whole all-gathers they share the link and all arrive at its
  // end, leaving the forward's compute after the link has gone quiet
  // (docs/bench/cluster.md, issue 43: 256 KiB x 8 measured best at 300 Mbit/s).
  constexpr int64_t kPieceBytes = 256 << 10;
  constexpr int kPiecesInFlight = 8;
  replica_gather_ = mesh_.replicate()->all_gather_into_in_order_async(
      replica_flat_, replica_flat_.narrow(0, mesh_.replicate()->rank() * part_numel_, part_numel_), kPieceBytes,
      kPiecesInFlight);
}

at::Tensor FSDPParamGroup::gather_parts_of(const at::Tensor& part) const {
  TESSEL_CHECK(split_over_replicas_ && part.numel() == part_numel_,
               "gather_parts_of({}): needs a split group and a tensor of its part's {} elements", name_, part_numel_);
  at::Tensor whole = at::empty({replica_flat_.numel()}, part.options());
  mesh_.replicate()->all_gather_into(whole, part.contiguous().view({-1}));
  return whole;
}

std::vector<at::Tensor> FSDPParamGroup::shard_views(const at::Tensor& whole) const {
  TESSEL_CHECK(split_over_replicas_ && whole.numel() == replica_flat_.numel(),
               "shard_views({}): needs a split group and a tensor of its {} elements", name_, replica_flat_.numel());
  std::vector<at::Tensor> views;
  for (const FSDPParam* p : param_ptrs_) {
    const at::Tensor& shard = p->sharded_param();
    views.push_back(whole.narrow(0, p->shard_offset(), shard.numel()).view(shard.sizes()));
  }
  return views;
}

at::Tensor FSDPParamGroup::part_of(const at::Tensor& whole) const {
  TESSEL_CHECK(split_over_replicas_ && whole.numel() == replica_flat_.numel(),
               "part_of({}): needs a split group and a tensor of its {} elements", name_, replica_flat_.numel());
  return whole.narrow(0, mesh_.replicate()->rank() * part_numel_, part_numel_).clone();
}

bool FSDPParamGroup::replica_parts_arrived() const {
  return !replica_gather_ || replica_gather_->is_completed();
}

void FSDPParamGroup::wait_for_replica_parts() {
  if (!replica_gather_) return;
  dist::WorkPtr work = std::move(replica_gather_);
  replica_gather_ = nullptr;
  work->wait();
}

int64_t FSDPParamGroup::sharded_grad_bytes() const {
  int64_t total = 0;
  for (const FSDPParam* p : param_ptrs_) total += tensor_bytes(p->sharded_param().grad());
  if (split_over_replicas_) total += tensor_bytes(replica_part_.grad());
  return total;
}

}  // namespace tessel::fsdp
