// Which algorithm OpenMPI's nonblocking all-reduce (MPI_Iallreduce, the coll
// libnbc component) runs. Left to itself, libnbc reduces to one root and
// broadcasts back (its "binomial" schedule: every byte through one rank)
// whenever the call is in place, whatever the size; tessel's native
// all-reduce is always in place. Its reduce-scatter + all-gather schedule
// (Rabenseifner's; libnbc's value 3, which falls back to its ring for
// buffers shorter than the group) moves (n-1)/n of the buffer twice per rank
// instead. Measured (docs/bench/comm.md, 4 ranks on 2 cores, the polled
// path, four runs each): 1 MiB 454-688 us against 688-1001 us with libnbc's
// own choice, 16 MiB 9.5-11.1 ms against 14.7-22.1 ms.
//
// So each rank asks for it before MPI starts (MPI_Init reads the
// environment), as `mpirun --mca coll_libnbc_iallreduce_algorithm 3` would.
// A value the user set (OMPI_MCA_coll_libnbc_iallreduce_algorithm) stays.
// Other MPI libraries ignore the variable.
#pragma once

namespace tessel::dist {

// The environment variable and the value tessel asks for.
inline constexpr const char* kNonblockingAllReduceVariable = "OMPI_MCA_coll_libnbc_iallreduce_algorithm";
inline constexpr const char* kReduceScatterAllGatherSchedule = "3";

// Sets the variable to kReduceScatterAllGatherSchedule unless the
// environment already names a value. Call before MPI_Init. Returns the
// value in effect.
const char* choose_nonblocking_all_reduce();

}  // namespace tessel::dist
