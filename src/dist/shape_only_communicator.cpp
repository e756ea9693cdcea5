#include "dist/shape_only_communicator.h"

#include <numeric>

#include "core/error.h"

namespace tessel::dist {

namespace {
std::vector<int> ranks_up_to(int size) {
  std::vector<int> out(static_cast<size_t>(size));
  std::iota(out.begin(), out.end(), 0);
  return out;
}

[[noreturn]] void refuse(const std::string& group, const char* what) {
  throw Error(fmt::format("{} on '{}': this group is a shape-only stand-in for a dry run and cannot "
                          "communicate",
                          what, group));
}
}  // namespace

ShapeOnlyCommunicator::ShapeOnlyCommunicator(int size, int rank, const std::string& name)
    : CommunicatorBase(rank, ranks_up_to(size), name, std::chrono::seconds(0)) {
  TESSEL_CHECK(size > 0 && rank >= 0 && rank < size, "shape-only group of size {} has no rank {}", size, rank);
}

WorkPtr ShapeOnlyCommunicator::all_gather_into_async(const at::Tensor&, const at::Tensor&) {
  refuse(name(), "all_gather");
}
WorkPtr ShapeOnlyCommunicator::all_gather_segments_async(const at::Tensor&, const at::Tensor&,
                                                         const std::vector<int64_t>&) {
  refuse(name(), "all_gather");
}
WorkPtr ShapeOnlyCommunicator::reduce_scatter_from_async(const at::Tensor&, const at::Tensor&, ReduceOp) {
  refuse(name(), "reduce_scatter");
}
WorkPtr ShapeOnlyCommunicator::all_reduce_async(const at::Tensor&, ReduceOp) { refuse(name(), "all_reduce"); }
WorkPtr ShapeOnlyCommunicator::all_to_all_async(const at::Tensor&, const at::Tensor&) {
  refuse(name(), "all_to_all");
}
WorkPtr ShapeOnlyCommunicator::all_to_all_v_async(const at::Tensor&, const std::vector<int64_t>&, const at::Tensor&,
                                                  const std::vector<int64_t>&) {
  refuse(name(), "all_to_all_v");
}
WorkPtr ShapeOnlyCommunicator::broadcast_async(const at::Tensor&, int) { refuse(name(), "broadcast"); }
WorkPtr ShapeOnlyCommunicator::barrier_async() { refuse(name(), "barrier"); }
WorkPtr ShapeOnlyCommunicator::ring_shift_async(const at::Tensor&, const at::Tensor&) {
  refuse(name(), "ring_shift");
}
CommunicatorPtr ShapeOnlyCommunicator::split(int, int, const std::string&) { refuse(name(), "split"); }

}  // namespace tessel::dist
