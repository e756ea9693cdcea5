// Collectives on GPU tensors (SPEC 10), every dtype tessel moves or reduces:
// on the device world of this launch (NCCL, or MPI over host copies where
// ranks share the GPU and NCCL refuses that) and on a one-rank NCCL
// communicator of each process. Expected values are computed here from each
// rank's formula, on the CPU, never by the code under test. Small integers
// are exact in every dtype, bf16 included, so results compare exactly.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "dist/nccl_collectives.h"
#include "gpu/gpu_world.h"

namespace tessel::gpu_testing {
namespace {

const std::vector<at::ScalarType> kReduced = {at::kFloat, at::kDouble, at::kBFloat16,
                                              at::kHalf,  at::kInt,    at::kLong};
const std::vector<at::ScalarType> kMoved = {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf,
                                            at::kInt,   at::kLong,   at::kByte,     at::kBool};

// Rank r's values: (3i + 7r) mod 50 (mod 2 for bool), all exact in every dtype.
at::Tensor values(int64_t n, int rank, at::ScalarType dtype, int64_t offset = 0) {
  at::Tensor v = (at::arange(offset, offset + n, at::kLong) * 3 + 7 * rank).remainder(50);
  if (dtype == at::kBool) v = v.remainder(2);
  return v.to(dtype);
}

at::Tensor on_gpu(const at::Tensor& t) { return t.to(gpu_world()->device); }

void expect_equal(const at::Tensor& got, const at::Tensor& want, const std::string& what) {
  const at::Tensor host = got.to(at::kCPU);
  EXPECT_TRUE(host.equal(want)) << what << " (" << device_path() << ")\ngot  "
                                << host.to(at::kDouble).slice(0, 0, 12) << "\nwant "
                                << want.to(at::kDouble).slice(0, 0, 12);
}

// Every collective on `comm` with tensors of `dtype`; n elements per rank.
void check_collectives(dist::Communicator& comm, at::ScalarType dtype, int64_t n,
                       const std::string& where) {
  const int W = comm.size(), r = comm.rank();
  const std::string what =
      where + " " + std::string(c10::toString(dtype)) + " n=" + std::to_string(n);
  // all-gather, and in place (this rank's slot of the output).
  {
    at::Tensor out = on_gpu(at::zeros({W * n}, dtype));
    comm.all_gather_into(out, on_gpu(values(n, r, dtype)));
    std::vector<at::Tensor> parts;
    for (int q = 0; q < W; ++q) parts.push_back(values(n, q, dtype));
    expect_equal(out, at::cat(parts), "all_gather " + what);
    at::Tensor in_place = on_gpu(at::zeros({W * n}, dtype));
    in_place.narrow(0, r * n, n).copy_(on_gpu(values(n, r, dtype)));
    comm.all_gather_into(in_place, in_place.narrow(0, r * n, n));
    expect_equal(in_place, at::cat(parts), "all_gather in place " + what);
  }
  // Segments gathered rank-major each into its own region.
  {
    const std::vector<int64_t> segments = {n / 3, 0, n - n / 3};
    at::Tensor out = on_gpu(at::zeros({W * n}, dtype));
    comm.all_gather_segments_async(out, on_gpu(values(n, r, dtype)), segments)->wait();
    std::vector<at::Tensor> want;
    int64_t at = 0;
    for (int64_t s : segments) {
      for (int q = 0; q < W; ++q) want.push_back(values(n, q, dtype).narrow(0, at, s));
      at += s;
    }
    expect_equal(out, at::cat(want), "all_gather_segments " + what);
  }
  // all_to_all: rank r's block j goes to rank j's block r.
  {
    at::Tensor out = on_gpu(at::zeros({W * n}, dtype));
    comm.all_to_all(out, on_gpu(values(W * n, r, dtype)));
    std::vector<at::Tensor> want;
    for (int q = 0; q < W; ++q) want.push_back(values(W * n, q, dtype).narrow(0, r * n, n));
    expect_equal(out, at::cat(want), "all_to_all " + what);
  }
  // all_to_all_v: rank r sends (r + j) % 3 + 1 rows of 2 to rank j.
  {
    auto rows = [&](int from, int to) { return static_cast<int64_t>((from + to) % 3 + 1); };
    std::vector<int64_t> send(W), receive(W);
    int64_t send_total = 0, receive_total = 0;
    for (int j = 0; j < W; ++j) {
      send[j] = rows(r, j);
      receive[j] = rows(j, r);
      send_total += send[j];
      receive_total += receive[j];
    }
    at::Tensor in = values(send_total * 2, r, dtype).view({send_total, 2});
    at::Tensor out = on_gpu(at::zeros({receive_total, 2}, dtype));
    comm.all_to_all_v(out, receive, on_gpu(in), send);
    std::vector<at::Tensor> want;
    for (int q = 0; q < W; ++q) {
      int64_t before = 0;
      for (int j = 0; j < r; ++j) before += rows(q, j);
      int64_t total = 0;
      for (int j = 0; j < W; ++j) total += rows(q, j);
      want.push_back(values(total * 2, q, dtype).view({total, 2}).narrow(0, before, rows(q, r)));
    }
    expect_equal(out, at::cat(want), "all_to_all_v " + what);
  }
  // broadcast from the last rank; the ring shift from the previous rank.
  {
    at::Tensor t = on_gpu(values(n, r, dtype));
    comm.broadcast(t, W - 1);
    expect_equal(t, values(n, W - 1, dtype), "broadcast " + what);
    at::Tensor out = on_gpu(at::zeros({n}, dtype));
    comm.ring_shift_async(out, on_gpu(values(n, r, dtype)))->wait();
    expect_equal(out, values(n, (r + W - 1) % W, dtype), "ring_shift " + what);
  }
  if (std::find(kReduced.begin(), kReduced.end(), dtype) == kReduced.end()) return;
  // all-reduce, sum and max; reduce-scatter sum, also in place.
  {
    at::Tensor sum = on_gpu(values(n, r, dtype));
    comm.all_reduce(sum, dist::ReduceOp::Sum);
    at::Tensor want = values(n, 0, at::kLong);
    for (int q = 1; q < W; ++q) want += values(n, q, at::kLong);
    expect_equal(sum, want.to(dtype), "all_reduce sum " + what);
    at::Tensor max = on_gpu(values(n, r, dtype));
    comm.all_reduce(max, dist::ReduceOp::Max);
    at::Tensor want_max = values(n, 0, at::kLong);
    for (int q = 1; q < W; ++q) want_max = at::maximum(want_max, values(n, q, at::kLong));
    expect_equal(max, want_max.to(dtype), "all_reduce max " + what);
    at::Tensor out = on_gpu(at::zeros({n}, dtype));
    comm.reduce_scatter_from(out, on_gpu(values(W * n, r, dtype)), dist::ReduceOp::Sum);
    at::Tensor want_rs = values(W * n, 0, at::kLong);
    for (int q = 1; q < W; ++q) want_rs += values(W * n, q, at::kLong);
    expect_equal(out, want_rs.narrow(0, r * n, n).to(dtype), "reduce_scatter " + what);
    at::Tensor in_place = on_gpu(values(W * n, r, dtype));
    comm.reduce_scatter_from(in_place.narrow(0, r * n, n), in_place, dist::ReduceOp::Sum);
    expect_equal(in_place.narrow(0, r * n, n), want_rs.narrow(0, r * n, n).to(dtype),
                 "reduce_scatter in place " + what);
  }
}

TEST(DeviceCollectives, EveryCollectiveAndDtypeOnTheDeviceWorld) {
  TESSEL_REQUIRE_GPU();
  dist::Communicator& world = *gpu_world()->world;
  for (at::ScalarType dtype : kMoved) {
    for (int64_t n : {1, 7, 4099})
      check_collectives(world, dtype, n, "world of " + std::to_string(world.size()));
  }
  RecordProperty("device_path", device_path());
}

TEST(DeviceCollectives, EveryCollectiveAndDtypeOnAOneRankNcclCommunicator) {
  TESSEL_REQUIRE_GPU();
  const dist::NcclInfo nccl = dist::nccl_info();
  ASSERT_TRUE(nccl.available) << nccl.reason;
  // Each process its own one-rank NCCL communicator on the GPU (NCCL allows
  // that however many processes share the device), over a one-rank host group.
  const dist::CommunicatorPtr self = dist::world()->split(dist::world()->rank(), 0, "self");
  auto nccl_self =
      dist::make_nccl_world(*self, gpu_world()->device.index(),
                            std::make_shared<dist::CollectiveWatch>(dist::world()->rank()));
  dist::DeviceCommunicator comm(self, nccl_self);
  for (at::ScalarType dtype : kMoved) {
    for (int64_t n : {1, 7, 4099})
      check_collectives(comm, dtype, n, "NCCL " + nccl.version + " one rank");
  }
  // The device path counted the calls, on the device side.
  EXPECT_GT(nccl_self->counters().count(dist::CollectiveKind::AllGather), 0);
}

TEST(DeviceCollectives, SplitGroupsOfTheDeviceWorldCollect) {
  TESSEL_REQUIRE_GPU();
  const dist::CommunicatorPtr& world = gpu_world()->world;
  if (world->size() < 2) GTEST_SKIP() << "needs 2 ranks or more";
  // Pairs of consecutive ranks, as a mesh's groups are made.
  const dist::CommunicatorPtr pair = world->split(world->rank() / 2, world->rank() % 2, "pair");
  check_collectives(*pair, at::kFloat, 1000, "pair");
  check_collectives(*pair, at::kBFloat16, 33, "pair");
}

}  // namespace
}  // namespace tessel::gpu_testing
