// Bad arguments throw tessel::Error naming the collective, the group and the
// offending value, before any communication.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/error.h"
#include "dist/single_process_communicator.h"
#include "dist/validation.h"

namespace tessel::dist {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(Validation, AllGatherWrongOutSize) {
  SingleProcessCommunicator comm;
  EXPECT_THAT(error_of([&] { comm.all_gather_into(at::zeros({5}), at::zeros({4})); }),
              AllOf(HasSubstr("all_gather"), HasSubstr("world"), HasSubstr("5 elements")));
  EXPECT_THAT(error_of([&] { check_all_gather("g (ranks 0,1)", 2, 0, at::zeros({6}),
                                              at::zeros({4})); }),
              AllOf(HasSubstr("'g (ranks 0,1)'"), HasSubstr("= 8")));
}

TEST(Validation, DtypeMismatch) {
  SingleProcessCommunicator comm;
  EXPECT_THAT(error_of([&] {
                comm.all_gather_into(at::zeros({4}), at::zeros({4}, at::kBFloat16));
              }),
              AllOf(HasSubstr("dtype"), HasSubstr("BFloat16"), HasSubstr("Float")));
}

TEST(Validation, NonContiguous) {
  SingleProcessCommunicator comm;
  at::Tensor t = at::zeros({4, 4}).t();
  EXPECT_THAT(error_of([&] { comm.all_reduce(t); }),
              AllOf(HasSubstr("all_reduce"), HasSubstr("not contiguous")));
  EXPECT_THAT(error_of([&] { comm.all_reduce(at::Tensor()); }), HasSubstr("undefined"));
}

TEST(Validation, ReductionDtypes) {
  SingleProcessCommunicator comm;
  EXPECT_THAT(error_of([&] { comm.all_reduce(at::zeros({3}, at::kBool)); }),
              AllOf(HasSubstr("all_reduce"), HasSubstr("Bool"), HasSubstr("cannot be reduced")));
  EXPECT_THAT(error_of([&] {
                comm.reduce_scatter_from(at::zeros({3}, at::kByte), at::zeros({3}, at::kByte));
              }),
              HasSubstr("reduce_scatter"));
  // Data movement accepts any dtype.
  at::Tensor b = at::ones({3}, at::kBool);
  at::Tensor o = at::zeros({3}, at::kBool);
  comm.all_gather_into(o, b);
  EXPECT_TRUE(at::equal(o, b));
  for (auto dtype : {at::kFloat, at::kDouble, at::kBFloat16, at::kHalf, at::kInt, at::kLong}) {
    EXPECT_TRUE(is_reducible_dtype(dtype));
  }
}

TEST(Validation, ReduceScatterSizes) {
  EXPECT_THAT(error_of([&] {
                check_reduce_scatter("dp (ranks 0,1,2)", 3, at::zeros({4}), at::zeros({11}));
              }),
              AllOf(HasSubstr("reduce_scatter"), HasSubstr("11 elements"), HasSubstr("12")));
}

TEST(Validation, AllToAllSplitsAndAliasing) {
  EXPECT_THAT(error_of([&] { check_all_to_all("g", 4, at::zeros({10}), at::zeros({10})); }),
              HasSubstr("do not split evenly"));
  EXPECT_THAT(error_of([&] { check_all_to_all("g", 2, at::zeros({10}), at::zeros({8})); }),
              HasSubstr("must match"));
  at::Tensor t = at::zeros({8});
  EXPECT_THAT(error_of([&] { check_all_to_all("g", 2, t, t); }), HasSubstr("share memory"));
}

TEST(Validation, AllToAllVCountsAndRows) {
  const std::vector<int64_t> two_one = {2, 1};
  EXPECT_THAT(error_of([&] { check_all_to_all_v("g", 3, at::zeros({3, 2}), two_one, at::zeros({3, 2}), two_one); }),
              AllOf(HasSubstr("all_to_all_v"), HasSubstr("out_counts has 2 entries for group size 3")));
  EXPECT_THAT(error_of([&] {
                check_all_to_all_v("g", 2, at::zeros({3, 2}), two_one, at::zeros({4, 2}), two_one);
              }),
              AllOf(HasSubstr("in_counts add up to 3 rows"), HasSubstr("in has 4 rows")));
  EXPECT_THAT(error_of([&] {
                check_all_to_all_v("g", 2, at::zeros({3, 2}), two_one, at::zeros({3, 2}), {4, -1});
              }),
              HasSubstr("in_counts[1] = -1 is negative"));
  EXPECT_THAT(error_of([&] {
                check_all_to_all_v("g", 2, at::zeros({3, 5}), two_one, at::zeros({3, 2}), two_one);
              }),
              HasSubstr("differ past dim 0"));
  at::Tensor t = at::zeros({3, 2});
  EXPECT_THAT(error_of([&] { check_all_to_all_v("g", 2, t, two_one, t, two_one); }), HasSubstr("share memory"));
  EXPECT_EQ(check_all_to_all_v("g", 2, at::zeros({0, 2, 3}), {0, 0}, at::zeros({3, 2, 3}), two_one), 6);
}

TEST(Validation, AllGatherInPlaceOnlyAtOwnSlot) {
  at::Tensor out = at::zeros({8});
  check_all_gather("g", 2, 1, out, out.narrow(0, 4, 4));  // rank 1's slot: fine
  EXPECT_THAT(error_of([&] { check_all_gather("g", 2, 0, out, out.narrow(0, 4, 4)); }),
              HasSubstr("overlaps"));
}

TEST(Validation, BroadcastRoot) {
  SingleProcessCommunicator comm;
  EXPECT_THAT(error_of([&] { comm.broadcast(at::zeros({2}), 1); }),
              AllOf(HasSubstr("broadcast"), HasSubstr("root 1")));
}

TEST(Validation, CpuOnlyForMpi) {
  EXPECT_THAT(error_of([&] { check_cpu("all_reduce", "g", at::empty({2}, at::TensorOptions().device(at::kMeta)), "tensor"); }),
              HasSubstr("CPU"));
}

TEST(Validation, TimeoutMustBePositive) {
  SingleProcessCommunicator comm;
  EXPECT_THROW(comm.set_timeout(std::chrono::milliseconds(0)), Error);
}

}  // namespace
}  // namespace tessel::dist
