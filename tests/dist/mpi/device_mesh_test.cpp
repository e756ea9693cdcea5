// DeviceMesh over real MPI ranks: every named group's communicator holds
// exactly the hand-listed members, in order, and its collectives reach only
// them (an all-reduce of each rank's world rank equals the sum of the listed
// members; an all-reduce of one-hot rank markers equals the member set).
#include "dist/device_mesh.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "core/error.h"

namespace tessel::dist {
namespace {

using Groups = std::vector<std::vector<int>>;

struct MeshCase {
  std::string label;
  MeshSizes sizes;
  std::map<std::string, Groups> expected;  // written by hand for sizes.world_size
};

// Cases for each world size the test runs at (2, 3 and 4 ranks).
std::vector<MeshCase> cases_for(int world) {
  switch (world) {
    case 1:
      return {{"fsdp1", {.world_size = 1}, {{"tp", {{0}}}, {"dp_shard", {{0}}}, {"dp", {{0}}}}}};
    case 2:
      return {
          {"fsdp2",
           {.world_size = 2},
           {{"tp", {{0}, {1}}},
            {"cp", {{0}, {1}}},
            {"dp_replicate", {{0}, {1}}},
            {"dp_shard", {{0, 1}}},
            {"dp_shard_cp", {{0, 1}}},
            {"dp", {{0, 1}}},
            {"dp_cp", {{0, 1}}}}},
          {"tp2",
           {.world_size = 2, .tp = 2},
           {{"tp", {{0, 1}}}, {"dp_shard", {{0}, {1}}}, {"dp", {{0}, {1}}}}},
          {"cp2",
           {.world_size = 2, .cp = 2},
           {{"cp", {{0, 1}}},
            {"tp", {{0}, {1}}},
            {"dp_shard", {{0}, {1}}},
            {"dp_shard_cp", {{0, 1}}},
            {"dp_cp", {{0, 1}}}}},
      };
    case 3:
      return {
          {"fsdp3",
           {.world_size = 3},
           {{"tp", {{0}, {1}, {2}}},
            {"dp_replicate", {{0}, {1}, {2}}},
            {"dp_shard", {{0, 1, 2}}},
            {"dp", {{0, 1, 2}}},
            {"dp_cp", {{0, 1, 2}}}}},
          {"tp3",
           {.world_size = 3, .tp = 3},
           {{"tp", {{0, 1, 2}}}, {"dp_shard", {{0}, {1}, {2}}}, {"dp_shard_cp", {{0}, {1}, {2}}}}},
      };
    case 4:
      return {
          {"hsdp2x2",
           {.world_size = 4, .dp_replicate = 2},
           {{"tp", {{0}, {1}, {2}, {3}}},
            {"dp_replicate", {{0, 2}, {1, 3}}},
            {"dp_shard", {{0, 1}, {2, 3}}},
            {"dp_shard_cp", {{0, 1}, {2, 3}}},
            {"dp", {{0, 1, 2, 3}}},
            {"dp_cp", {{0, 1, 2, 3}}}}},
          {"tp2_fsdp2",
           {.world_size = 4, .tp = 2},
           {{"tp", {{0, 1}, {2, 3}}},
            {"cp", {{0}, {1}, {2}, {3}}},
            {"dp_replicate", {{0}, {1}, {2}, {3}}},
            {"dp_shard", {{0, 2}, {1, 3}}},
            {"dp_shard_cp", {{0, 2}, {1, 3}}},
            {"dp", {{0, 2}, {1, 3}}},
            {"dp_cp", {{0, 2}, {1, 3}}}}},
          {"cp2_tp2",
           {.world_size = 4, .cp = 2, .tp = 2},
           {{"tp", {{0, 1}, {2, 3}}},
            {"cp", {{0, 2}, {1, 3}}},
            {"dp_shard", {{0}, {1}, {2}, {3}}},
            {"dp_shard_cp", {{0, 2}, {1, 3}}},
            {"dp", {{0}, {1}, {2}, {3}}},
            {"dp_cp", {{0, 2}, {1, 3}}}}},
          {"fsdp4",
           {.world_size = 4},
           {{"dp_shard", {{0, 1, 2, 3}}}, {"dp_replicate", {{0}, {1}, {2}, {3}}}}},
      };
    default:
      return {};
  }
}

const std::vector<int>& my_group(const Groups& groups, int rank) {
  for (const auto& g : groups) {
    if (std::find(g.begin(), g.end(), rank) != g.end()) return g;
  }
  throw Error(fmt::format("rank {} is in none of the expected groups (test table error)", rank));
}

TEST(DeviceMesh, GroupsHaveTheListedMembers) {
  CommunicatorPtr w = world();
  const int me = w->rank(), n = w->size();
  const auto cases = cases_for(n);
  ASSERT_FALSE(cases.empty()) << "no hand-written cases for world size " << n;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.label);
    DeviceMesh mesh(MeshLayout(c.sizes), w);
    for (const auto& [name, groups] : c.expected) {
      SCOPED_TRACE(name);
      const auto& members = my_group(groups, me);
      const CommunicatorPtr& g = mesh.group(name);
      EXPECT_EQ(g->size(), static_cast<int>(members.size()));
      EXPECT_EQ(mesh.size(name), static_cast<int>(members.size()));
      EXPECT_EQ(g->world_ranks(), members);
      const int position =
          static_cast<int>(std::find(members.begin(), members.end(), me) - members.begin());
      EXPECT_EQ(g->rank(), position);
      EXPECT_EQ(mesh.coordinate(name), position);

      // The sum of world ranks over the group equals the members' sum.
      at::Tensor sum = at::full({1}, static_cast<int64_t>(me), at::kLong);
      g->all_reduce(sum);
      EXPECT_EQ(sum.item<int64_t>(), std::accumulate(members.begin(), members.end(), int64_t{0}));
      // One-hot markers: exactly the members took part.
      at::Tensor marks = at::zeros({n}, at::kLong);
      marks[me] = 1;
      g->all_reduce(marks);
      at::Tensor expected = at::zeros({n}, at::kLong);
      for (int r : members) expected[r] = 1;
      EXPECT_TRUE(at::equal(marks, expected)) << marks;
    }
  }
}

TEST(DeviceMesh, WorldSizeMismatchIsAnErrorNamingBothSizes) {
  CommunicatorPtr w = world();
  const int n = w->size();
  MeshLayout layout({.world_size = 2 * n});
  try {
    DeviceMesh mesh(layout, w);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("needs {} ranks", 2 * n)), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(fmt::format("has {}", n)), std::string::npos) << e.what();
  }
}

TEST(DeviceMesh, UnknownGroupListsNames) {
  CommunicatorPtr w = world();
  DeviceMesh mesh(MeshLayout({.world_size = w->size()}), w);
  EXPECT_THROW(mesh.group("data_parallel"), UsageError);
}

}  // namespace
}  // namespace tessel::dist
