// Memory every rank of a group maps (dist/node_shared_memory.h): one rank's
// write is every other rank's read, the segment starts zeroed, leaves nothing
// in /dev/shm, and a subgroup's segment is its own.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <dirent.h>

#include <cstring>
#include <string>

#include "dist/communicator.h"
#include "dist/node_shared_memory.h"

namespace tessel::dist {
namespace {

// Names in /dev/shm that a tessel segment would have.
int tessel_segments_in_dev_shm() {
  int count = 0;
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* e = readdir(dir)) count += std::strncmp(e->d_name, "tessel-", 7) == 0 ? 1 : 0;
    closedir(dir);
  }
  return count;
}

TEST(NodeSharedMemory, EachRanksWriteIsReadByEveryRank) {
  CommunicatorPtr w = world();
  const int n = w->size();
  constexpr int64_t kPerRank = 3000;  // not a page multiple
  c10::DataPtr memory = allocate_node_shared(*w, n * kPerRank * sizeof(int64_t), "the test");
  auto* slots = static_cast<int64_t*>(memory.get());
  ASSERT_EQ(reinterpret_cast<uintptr_t>(slots) % 4096, 0u);
  for (int64_t i = 0; i < n * kPerRank; ++i) ASSERT_EQ(slots[i], 0) << "not zeroed at " << i;
  w->barrier();  // everyone checked the zeros before anyone writes
  for (int64_t i = 0; i < kPerRank; ++i) slots[w->rank() * kPerRank + i] = 1000 * w->rank() + i;
  w->barrier();
  for (int r = 0; r < n; ++r) {
    for (int64_t i = 0; i < kPerRank; ++i) ASSERT_EQ(slots[r * kPerRank + i], 1000 * r + i) << "rank " << r;
  }
  w->barrier();
  EXPECT_EQ(tessel_segments_in_dev_shm(), 0) << "a segment's name outlived its mapping";
}

TEST(NodeSharedMemory, SubgroupsGetSegmentsOfTheirOwn) {
  CommunicatorPtr w = world();
  if (w->size() < 2) GTEST_SKIP();
  CommunicatorPtr half = w->split(w->rank() % 2, w->rank(), "parity");
  c10::DataPtr memory = allocate_node_shared(*half, 4096, "the test");
  auto* value = static_cast<int32_t*>(memory.get());
  if (half->rank() == 0) *value = 1 + w->rank() % 2;
  w->barrier();
  EXPECT_EQ(*value, 1 + w->rank() % 2);
}

}  // namespace
}  // namespace tessel::dist
