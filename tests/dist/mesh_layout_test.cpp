// MeshLayout: group rank lists against hand-written expectations, and every
// invalid layout rejected with a message naming the value and the fix.
#include "dist/mesh_layout.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "core/error.h"

namespace tessel::dist {
namespace {

using Groups = std::vector<std::vector<int>>;
using ::testing::HasSubstr;

struct LayoutCase {
  std::string label;
  MeshSizes sizes;
  std::array<int, kNumMeshDims> dims;  // dp_replicate, dp_shard, cp, tp
  std::map<std::string, Groups> expected;
};

std::vector<LayoutCase> layout_cases() {
  return {
      {"world16_hsdp2",
       {.world_size = 16, .dp_replicate = 2},
       {2, 8, 1, 1},
       {{"tp", {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7},
                {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}}},
        {"cp", {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7},
                {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}}},
        {"dp_shard", {{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}}},
        {"dp_shard_cp", {{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}}},
        {"dp_replicate",
         {{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}},
        {"dp", {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}},
        {"dp_cp", {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}}}},
      {"world8_tp2_hsdp2",
       {.world_size = 8, .dp_replicate = 2, .tp = 2},
       {2, 2, 1, 2},
       {{"tp", {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
        {"cp", {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}},
        {"dp_shard", {{0, 2}, {1, 3}, {4, 6}, {5, 7}}},
        {"dp_shard_cp", {{0, 2}, {1, 3}, {4, 6}, {5, 7}}},
        {"dp_replicate", {{0, 4}, {1, 5}, {2, 6}, {3, 7}}},
        {"dp", {{0, 2, 4, 6}, {1, 3, 5, 7}}},
        {"dp_cp", {{0, 2, 4, 6}, {1, 3, 5, 7}}}}},
      {"world4_fsdp",
       {.world_size = 4},
       {1, 4, 1, 1},
       {{"tp", {{0}, {1}, {2}, {3}}},
        {"dp_replicate", {{0}, {1}, {2}, {3}}},
        {"dp_shard", {{0, 1, 2, 3}}},
        {"dp", {{0, 1, 2, 3}}}}},
      {"world1",
       {.world_size = 1},
       {1, 1, 1, 1},
       {{"tp", {{0}}}, {"dp_shard_cp", {{0}}}, {"dp_cp", {{0}}}}},
      {"world8_cp2",
       {.world_size = 8, .cp = 2},
       {1, 4, 2, 1},
       {{"cp", {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
        {"tp", {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}},
        {"dp_shard", {{0, 2, 4, 6}, {1, 3, 5, 7}}},
        {"dp_shard_cp", {{0, 1, 2, 3, 4, 5, 6, 7}}},
        {"dp", {{0, 2, 4, 6}, {1, 3, 5, 7}}},
        {"dp_cp", {{0, 1, 2, 3, 4, 5, 6, 7}}}}},
      {"world16_hsdp2_cp2_tp2",
       {.world_size = 16, .dp_replicate = 2, .cp = 2, .tp = 2},
       {2, 2, 2, 2},
       // rank = 8*rep + 4*shard + 2*cp + tp
       {{"tp", {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}}},
        {"cp", {{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}}},
        {"dp_shard", {{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}}},
        {"dp_replicate", {{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}}},
        {"dp_shard_cp", {{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}}},
        {"dp", {{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}},
        {"dp_cp", {{0, 2, 4, 6, 8, 10, 12, 14}, {1, 3, 5, 7, 9, 11, 13, 15}}}}},
      // The MoE mesh: the world flattened, ep fastest. Dense dims ignore ep.
      {"world8_ep2",
       {.world_size = 8, .ep = 2},
       {1, 8, 1, 1},
       {{"dp_shard", {{0, 1, 2, 3, 4, 5, 6, 7}}},
        {"ep", {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
        {"ep_shard", {{0, 2, 4, 6}, {1, 3, 5, 7}}}}},
      {"world8_hsdp2_ep2",
       {.world_size = 8, .dp_replicate = 2, .ep = 2},
       {2, 4, 1, 1},
       {{"dp_replicate", {{0, 4}, {1, 5}, {2, 6}, {3, 7}}},
        {"dp_shard", {{0, 1, 2, 3}, {4, 5, 6, 7}}},
        {"ep", {{0, 1}, {2, 3}, {4, 5}, {6, 7}}},
        {"ep_shard", {{0, 2, 4, 6}, {1, 3, 5, 7}}}}},
      // The seed's rule (world divisible by tp*cp*ep) holds; an ep group
      // then spans the (cp, tp) ranks of one dp_shard position.
      {"world16_cp2_tp2_ep4",
       {.world_size = 16, .cp = 2, .tp = 2, .ep = 4},
       {1, 4, 2, 2},
       {{"ep", {{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}}},
        {"ep_shard", {{0, 4, 8, 12}, {1, 5, 9, 13}, {2, 6, 10, 14}, {3, 7, 11, 15}}}}},
      {"world4_ep1",
       {.world_size = 4},
       {1, 4, 1, 1},
       {{"ep", {{0}, {1}, {2}, {3}}}, {"ep_shard", {{0, 1, 2, 3}}}}},
      {"world12_hsdp3_tp2",
       {.world_size = 12, .dp_replicate = 3, .tp = 2},
       {3, 2, 1, 2},
       {{"tp", {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}}},
        {"dp_shard", {{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}}},
        {"dp_replicate", {{0, 4, 8}, {1, 5, 9}, {2, 6, 10}, {3, 7, 11}}},
        {"dp", {{0, 2, 4, 6, 8, 10}, {1, 3, 5, 7, 9, 11}}}}},
  };
}

class MeshLayoutGroups : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(MeshLayoutGroups, DimsAndGroupsMatchHandWrittenLists) {
  const auto& c = GetParam();
  MeshLayout layout(c.sizes);
  EXPECT_EQ(layout.dims(), c.dims);
  EXPECT_EQ(layout.dp_size(), c.dims[0] * c.dims[1]);
  for (const auto& [name, expected] : c.expected) {
    EXPECT_EQ(layout.groups(name), expected) << "group " << name;
    EXPECT_EQ(layout.size(name), static_cast<int>(expected[0].size())) << "group " << name;
  }
}

// group_index / rank_in_group / coordinate must agree with the lists: the
// rank sits at position rank_in_group of list group_index, and every rank
// appears in exactly one group of each name.
TEST_P(MeshLayoutGroups, IndexLookupsAgreeWithLists) {
  const auto& c = GetParam();
  MeshLayout layout(c.sizes);
  for (const auto& spec : MeshLayout::group_specs()) {
    const auto groups = layout.groups(spec.name);
    std::multiset<int> seen;
    for (const auto& g : groups) seen.insert(g.begin(), g.end());
    ASSERT_EQ(static_cast<int>(seen.size()), c.sizes.world_size) << spec.name;
    for (int r = 0; r < c.sizes.world_size; ++r) {
      EXPECT_EQ(seen.count(r), 1u) << spec.name << " rank " << r;
      const int gi = layout.group_index(spec.name, r);
      const int pos = layout.rank_in_group(spec.name, r);
      ASSERT_LT(gi, static_cast<int>(groups.size()));
      ASSERT_LT(pos, static_cast<int>(groups[gi].size()));
      EXPECT_EQ(groups[gi][pos], r) << spec.name << " rank " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Table, MeshLayoutGroups, ::testing::ValuesIn(layout_cases()),
                         [](const auto& info) { return info.param.label; });

TEST(MeshLayout, CoordinatesAreRowMajorWithTpFastest) {
  MeshLayout layout({.world_size = 16, .dp_replicate = 2, .cp = 2, .tp = 2});
  using C = std::array<int, kNumMeshDims>;
  EXPECT_EQ(layout.coordinate(0), (C{0, 0, 0, 0}));
  EXPECT_EQ(layout.coordinate(1), (C{0, 0, 0, 1}));
  EXPECT_EQ(layout.coordinate(2), (C{0, 0, 1, 0}));
  EXPECT_EQ(layout.coordinate(4), (C{0, 1, 0, 0}));
  EXPECT_EQ(layout.coordinate(11), (C{1, 0, 1, 1}));
  EXPECT_EQ(layout.coordinate(15), (C{1, 1, 1, 1}));
  EXPECT_THROW(layout.coordinate(16), Error);
  EXPECT_THROW(layout.coordinate(-1), Error);
}

TEST(MeshLayout, UnknownGroupNameListsTheValidOnes) {
  MeshLayout layout({.world_size = 4});
  try {
    layout.groups("dp_shrad");
    FAIL() << "expected UsageError";
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("dp_shrad"));
    EXPECT_THAT(e.what(), HasSubstr("dp_shard_cp"));
  }
}

struct InvalidCase {
  std::string label;
  MeshSizes sizes;
  std::vector<std::string> message_parts;
};

class MeshLayoutInvalid : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(MeshLayoutInvalid, ThrowsUsageErrorNamingValuesAndFix) {
  const auto& c = GetParam();
  try {
    MeshLayout layout(c.sizes);
    FAIL() << "expected UsageError for " << c.label << ", got " << layout.describe();
  } catch (const UsageError& e) {
    for (const auto& part : c.message_parts) EXPECT_THAT(e.what(), HasSubstr(part));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, MeshLayoutInvalid,
    ::testing::ValuesIn(std::vector<InvalidCase>{
        {"replicate_equals_dp",
         {.world_size = 8, .dp_replicate = 8},
         {"dp_replicate_size=8", "smaller than", "dp_size", "{2, 4}"}},
        {"replicate_equals_dp_with_tp",
         {.world_size = 8, .dp_replicate = 4, .tp = 2},
         {"dp_replicate_size=4", "smaller than", "= 4", "{2}"}},
        {"replicate_larger_than_dp", {.world_size = 4, .dp_replicate = 8}, {"dp_replicate_size=8", "smaller than"}},
        {"replicate_not_dividing_dp",
         {.world_size = 12, .dp_replicate = 5},
         {"dp_replicate_size=5", "evenly divide", "= 12", "{2, 3, 4, 6}"}},
        {"replicate_not_dividing_dp_tp2",
         {.world_size = 12, .dp_replicate = 4, .tp = 2},
         {"dp_replicate_size=4", "evenly divide", "= 6", "{2, 3}"}},
        {"replicate_on_prime_dp",
         {.world_size = 3, .dp_replicate = 2},
         {"dp_replicate_size=2", "dp_size=3", "dp_replicate_size=1"}},
        {"replicate_zero",
         {.world_size = 8, .dp_replicate = 0},
         {"dp_replicate_size=0", "positive integer", "use 1 to disable HSDP"}},
        {"replicate_negative", {.world_size = 8, .dp_replicate = -2}, {"dp_replicate_size=-2", "positive integer"}},
        {"hsdp_without_v2",
         {.world_size = 16, .dp_replicate = 2, .v2 = false},
         {"dp_replicate_size=2", "HSDP only works on the DTensor v2 backend", "policy.dtensor_cfg._v2=true"}},
        {"world_not_divisible_by_tp",
         {.world_size = 6, .tp = 4},
         {"world size 6", "tp*cp*ep = 4", "tensor_parallel_size=4"}},
        {"world_not_divisible_by_tp_cp",
         {.world_size = 8, .cp = 3, .tp = 2},
         {"world size 8", "tp*cp*ep = 6", "context_parallel_size=3"}},
        {"ep_not_dividing_world",
         {.world_size = 6, .ep = 4},
         {"world size 6", "tp*cp*ep = 4", "expert_parallel_size=4"}},
        {"replicate_not_dividing_seed_dp",
         {.world_size = 8, .dp_replicate = 2, .ep = 4},
         {"dp_replicate_size=2", "dp_size = world 8 / (tp 1 * cp 1 * ep 4) = 2", "smaller"}},
        {"tp_zero", {.world_size = 8, .tp = 0}, {"tensor_parallel_size=0", "positive"}},
        {"cp_negative", {.world_size = 8, .cp = -1}, {"context_parallel_size=-1", "positive"}},
        {"world_zero", {.world_size = 0}, {"world size 0"}},
    }),
    [](const auto& info) { return info.param.label; });

TEST(ValidateModelForMesh, AcceptsDivisibleHeadsAndSequence) {
  EXPECT_TRUE(validate_model_for_mesh(32, 8, 4, 2048, true).empty());
  EXPECT_TRUE(validate_model_for_mesh(7, 7, 1, 15, false).empty());
  EXPECT_TRUE(validate_model_for_mesh(8, 2, 2, 15, false).empty());  // no SP: any length
}

TEST(ValidateModelForMesh, RejectsHeadsNotDivisibleByTp) {
  try {
    validate_model_for_mesh(12, 4, 8, 1024, false);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("12 attention heads"));
    EXPECT_THAT(e.what(), HasSubstr("tensor_parallel_size=8"));
  }
}

TEST(ValidateModelForMesh, RejectsKvHeadsNotDivisibleByTp) {
  try {
    validate_model_for_mesh(16, 2, 4, 1024, false);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("2 key/value heads"));
    EXPECT_THAT(e.what(), HasSubstr("tensor_parallel_size=4"));
  }
}

TEST(ValidateModelForMesh, RejectsSequenceNotDivisibleWithSequenceParallel) {
  try {
    validate_model_for_mesh(8, 8, 2, 1023, true);
    FAIL();
  } catch (const UsageError& e) {
    EXPECT_THAT(e.what(), HasSubstr("sequence length 1023"));
    EXPECT_THAT(e.what(), HasSubstr("make_sequence_length_divisible_by=2"));
  }
}

TEST(ValidateModelForMesh, WarnsForSequenceParallelWithoutTp) {
  const auto warnings = validate_model_for_mesh(8, 8, 1, 1023, true);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("sequence_parallel"));
  EXPECT_THAT(warnings[0], HasSubstr("tensor_parallel_size=1"));
}

}  // namespace
}  // namespace tessel::dist
