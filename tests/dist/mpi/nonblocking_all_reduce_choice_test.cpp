// What the MPI library itself runs for MPI_Iallreduce once tessel's world
// has started it: read through MPI's tool interface (MPI_T), not from
// tessel. With OpenMPI, libnbc's algorithm variable must hold the
// reduce-scatter + all-gather schedule tessel asked for before MPI_Init
// (dist/nonblocking_all_reduce_choice.h); set after MPI_Init, or not at all,
// it would read 0 (libnbc's own choice: a root's reduce and broadcast for
// every in-place call). Skipped where the library has no such variable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "dist/communicator.h"
#include "dist/mpi_c.h"
#include "dist/nonblocking_all_reduce_choice.h"

namespace tessel::dist {
namespace {

TEST(MpiNonblockingAllReduce, LibnbcRunsTheReduceScatterAllGatherSchedule) {
  CommunicatorPtr w = world();  // MPI is running
  const char* launch = std::getenv(kNonblockingAllReduceVariable);
  if (launch != nullptr && std::string(launch) != kReduceScatterAllGatherSchedule) {
    GTEST_SKIP() << "the launch set " << kNonblockingAllReduceVariable << "=" << launch;
  }
  int provided = 0;
  ASSERT_EQ(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided), MPI_SUCCESS);
  int index = -1;
  if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) != MPI_SUCCESS) {
    MPI_T_finalize();
    GTEST_SKIP() << "this MPI library has no coll_libnbc_iallreduce_algorithm (not OpenMPI's libnbc)";
  }
  MPI_T_cvar_handle handle;
  int count = 0;
  ASSERT_EQ(MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count), MPI_SUCCESS);
  ASSERT_EQ(count, 1);
  int value = -1;
  ASSERT_EQ(MPI_T_cvar_read(handle, &value), MPI_SUCCESS);
  MPI_T_cvar_handle_free(&handle);
  MPI_T_finalize();
  EXPECT_EQ(value, std::atoi(kReduceScatterAllGatherSchedule));
}

}  // namespace
}  // namespace tessel::dist
