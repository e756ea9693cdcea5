#include "dist/single_process_communicator.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "dist/validation.h"
#include "dist/work.h"

namespace tessel::dist {
namespace {

WorkPtr done() { return std::make_shared<CompletedWork>(); }

// Copies between flat views, so out and in may differ in shape.
void flat_copy(const at::Tensor& out, const at::Tensor& in) {
  if (out.numel() == 0) return;
  at::NoGradGuard no_grad;
  out.view(-1).copy_(in.view(-1));
}

}  // namespace

SingleProcessCommunicator::SingleProcessCommunicator(const std::string& name, int world_rank)
    : CommunicatorBase(0, {world_rank}, name, std::chrono::seconds(300)) {}

WorkPtr SingleProcessCommunicator::all_gather_into_async(const at::Tensor& out,
                                                         const at::Tensor& in) {
  check_all_gather(name(), 1, 0, out, in);
  record(CollectiveKind::AllGather, static_cast<int64_t>(in.nbytes()));
  flat_copy(out, in);
  return done();
}

WorkPtr SingleProcessCommunicator::all_gather_segments_async(const at::Tensor& out, const at::Tensor& in,
                                                             const std::vector<int64_t>& segment_numels) {
  // Over one rank every segment's region is the segment itself.
  check_all_gather_segments(name(), 1, 0, out, in, segment_numels);
  record(CollectiveKind::AllGather, static_cast<int64_t>(in.nbytes()));
  flat_copy(out, in);
  return done();
}

WorkPtr SingleProcessCommunicator::reduce_scatter_from_async(const at::Tensor& out,
                                                             const at::Tensor& in, ReduceOp) {
  // The reduction over one rank is the identity, for SUM and MAX alike.
  check_reduce_scatter(name(), 1, out, in);
  record(CollectiveKind::ReduceScatter, static_cast<int64_t>(in.nbytes()));
  flat_copy(out, in);
  return done();
}

WorkPtr SingleProcessCommunicator::all_reduce_async(const at::Tensor& tensor, ReduceOp) {
  check_all_reduce(name(), tensor);
  record(CollectiveKind::AllReduce, static_cast<int64_t>(tensor.nbytes()));
  return done();
}

WorkPtr SingleProcessCommunicator::all_to_all_async(const at::Tensor& out, const at::Tensor& in) {
  check_all_to_all(name(), 1, out, in);
  record(CollectiveKind::AllToAll, static_cast<int64_t>(in.nbytes()));
  flat_copy(out, in);
  return done();
}

WorkPtr SingleProcessCommunicator::all_to_all_v_async(const at::Tensor& out, const std::vector<int64_t>& out_counts,
                                                      const at::Tensor& in, const std::vector<int64_t>& in_counts) {
  check_all_to_all_v(name(), 1, out, out_counts, in, in_counts);
  record(CollectiveKind::AllToAll, static_cast<int64_t>(in.nbytes()));
  flat_copy(out, in);  // the one rank's rows go to itself
  return done();
}

WorkPtr SingleProcessCommunicator::broadcast_async(const at::Tensor& tensor, int root) {
  check_broadcast(name(), 1, tensor, root);
  record(CollectiveKind::Broadcast, static_cast<int64_t>(tensor.nbytes()));
  return done();
}

WorkPtr SingleProcessCommunicator::barrier_async() {
  record(CollectiveKind::Barrier, 0);
  return done();
}

WorkPtr SingleProcessCommunicator::ring_shift_async(const at::Tensor& out, const at::Tensor& in) {
  check_ring_shift(name(), out, in);
  record(CollectiveKind::RingShift, static_cast<int64_t>(in.nbytes()));
  flat_copy(out, in);  // the next rank of a ring of one is itself
  return done();
}

CommunicatorPtr SingleProcessCommunicator::split(int color, int, const std::string& name) {
  TESSEL_CHECK(color >= 0,
               "split of group '{}' into '{}': color {} is negative; every rank must pass a "
               "color >= 0",
               this->name(), name, color);
  auto sub = std::make_shared<SingleProcessCommunicator>(name, world_ranks()[0]);
  sub->set_timeout(timeout());
  return sub;
}

}  // namespace tessel::dist
