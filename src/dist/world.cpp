// world() and shutdown(): choose the backend from how the process was
// launched, initialize MPI with a thread level the communication thread can
// use, and size libtorch's intra-op pool so ranks sharing a machine do not
// oversubscribe its cores.
#include "dist/mpi_c.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>
#include <mutex>
#include <numeric>
#include <optional>

#include "core/compute_threads.h"
#include "core/error.h"
#include "core/log.h"
#include "dist/progress_engine.h"
#include "dist/communicator.h"
#include "dist/core_sharing.h"
#include "dist/nonblocking_all_reduce_choice.h"
#include "dist/mpi_communicator.h"
#include "dist/node_map.h"
#include "dist/shared_memory_copy.h"
#include "dist/single_process_communicator.h"
#include "dist/timeout.h"

namespace tessel::dist {
namespace {

struct WorldState {
  std::mutex mutex;
  CommunicatorPtr world;
  bool mpi_initialized = false;
  bool shut_down = false;
  std::optional<CoreSharing> core_sharing;  // set by make_mpi_world
};

WorldState& state() {
  static auto* s = new WorldState();  // never destroyed: see ProgressEngine::instance()
  return *s;
}

// A positive integer from the environment, or `fallback` when unset.
int env_int(const char* name, int fallback) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return fallback;
  char* end = nullptr;
  const long value = std::strtol(env, &end, 10);
  if (end == env || *end != '\0' || value <= 0 || value > 1 << 20) {
    throw UsageError(fmt::format("{}='{}' is not a positive integer; fix or unset it", name, env));
  }
  return static_cast<int>(value);
}

// World size announced by the launcher (OpenMPI, then MPICH/PMI, then PMIx).
// SLURM's PMIx plugin (`srun --mpi=pmix`, 22.05) sets PMIX_RANK but no size;
// its step's task count is the world MPI_Init will find.
int launcher_world_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    const int size = env_int(name, 0);
    if (size > 0) return size;
  }
  const char* pmix_rank = std::getenv("PMIX_RANK");
  if (pmix_rank != nullptr && *pmix_rank != '\0') return env_int("SLURM_STEP_NUM_TASKS", 1);
  return 1;
}

void choose_compute_threads(bool multi_rank) {
  const int requested = env_int("TESSEL_NUM_THREADS", 0);
  if (requested > 0) {
    core::set_compute_threads(requested);
    return;
  }
  if (!multi_rank) return;  // libtorch's default (honours OMP_NUM_THREADS)
  // OpenMPI's mpirun, MPICH's, SLURM's srun (its per-node count, when the job says one).
  const int local_ranks = env_int("OMPI_COMM_WORLD_LOCAL_SIZE",
                                  env_int("MPI_LOCALNRANKS", env_int("SLURM_NTASKS_PER_NODE", 1)));
  // The cores this process may run on (its affinity mask: a cpuset or
  // taskset gives fewer than the machine has), shared by the node's ranks.
  const int threads = std::max(1, usable_cores() / local_ranks);
  core::set_compute_threads(threads);  // libtorch's pool and the BLAS's (core/compute_threads.h)
}

// Every rank's `mine` (cut at MPI_MAX_PROCESSOR_NAME characters), in rank
// order. Called at start-up, before the progress engine exists.
std::vector<std::string> gather_names(MPI_Comm comm, int size, const std::string& mine) {
  std::vector<char> own(MPI_MAX_PROCESSOR_NAME, '\0');
  std::copy_n(mine.data(), std::min<std::size_t>(mine.size(), MPI_MAX_PROCESSOR_NAME), own.data());
  std::vector<char> all(static_cast<std::size_t>(size) * MPI_MAX_PROCESSOR_NAME);
  MPI_Allgather(own.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm);
  std::vector<std::string> names;
  for (int r = 0; r < size; ++r) {
    const char* name = all.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME;
    names.emplace_back(name, strnlen(name, MPI_MAX_PROCESSOR_NAME));
  }
  return names;
}

// Which ranks share a node (their processor names, hostnames).
std::vector<std::string> gather_processor_names(MPI_Comm comm, int size) {
  char mine[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_Get_processor_name(mine, &length);
  return gather_names(comm, size, std::string(mine, strnlen(mine, MPI_MAX_PROCESSOR_NAME)));
}

CommunicatorPtr make_mpi_world(std::chrono::milliseconds timeout) {
  int provided = 0;
  choose_shared_memory_copy();      // read by MPI_Init
  choose_nonblocking_all_reduce();  // likewise
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  state().mpi_initialized = true;
  TESSEL_CHECK(provided >= MPI_THREAD_SERIALIZED,
               "the MPI library provides thread level {} but tessel needs at least "
               "MPI_THREAD_SERIALIZED ({}) for its communication thread; use an MPI built with "
               "thread support",
               provided, MPI_THREAD_SERIALIZED);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // A private copy keeps tessel's collectives apart from any MPI calls the
  // program makes on MPI_COMM_WORLD itself (the benchmark does).
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  std::vector<int> ranks(size);
  std::iota(ranks.begin(), ranks.end(), 0);
  auto nodes = std::make_shared<const NodeMap>(NodeMap::from_names(gather_processor_names(comm, size)));
  const CoreSharing sharing = core_sharing(gather_names(comm, size, this_machine_id()), rank, usable_cores());
  state().core_sharing = sharing;
  ProgressEngine::instance().start(rank, provided >= MPI_THREAD_MULTIPLE, !sharing.oversubscribed(),
                                   nodes->num_nodes() > 1);
  return std::make_shared<MpiCommunicator>(comm, rank, std::move(ranks), "world", timeout, std::move(nodes));
}

}  // namespace

CommunicatorPtr world() {
  WorldState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.world) return s.world;
  TESSEL_CHECK(!s.shut_down,
               "tessel::dist::world() called after tessel::dist::shutdown(); MPI cannot be "
               "initialized twice, so shut down only at the end of the program");
  const auto timeout = default_collective_timeout();
  const bool multi_rank = launcher_world_size() > 1;
  choose_compute_threads(multi_rank);
  if (multi_rank) {
    s.world = make_mpi_world(timeout);
  } else {
    auto single = std::make_shared<SingleProcessCommunicator>();
    single->set_timeout(timeout);
    s.world = single;
  }
  log::set_rank(s.world->rank(), s.world->size());
  if (s.core_sharing && s.core_sharing->oversubscribed()) {
    log::info("{} ranks share this machine's {} cores: collectives wait by polling and yielding the core, not in "
              "MPI's spinning blocking calls",
              s.core_sharing->ranks_on_machine, s.core_sharing->cores);
  }
  return s.world;
}

void shutdown() {
  WorldState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.shut_down || !s.world) return;
  s.shut_down = true;
  ProgressEngine::instance().stop();  // finishes the queued collectives first
  s.world.reset();
  if (s.mpi_initialized) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
}

namespace {

// The started world when it has other ranks, else null.
CommunicatorPtr multi_rank_world() {
  WorldState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.shut_down || !s.world || s.world->size() < 2) return nullptr;
  return s.world;
}

}  // namespace

CoreSharing world_core_sharing() {
  WorldState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.core_sharing) return *s.core_sharing;
  CoreSharing single;
  single.cores = usable_cores();
  return single;
}

std::string rank_label() {
  const CommunicatorPtr w = multi_rank_world();
  return w ? fmt::format(" on rank {} of {}", w->rank(), w->size()) : std::string();
}

int end_job_after_error(int exit_code) {
  if (!multi_rank_world()) {  // a world of several ranks is MPI's
    shutdown();
    return exit_code;
  }
  std::fflush(stdout);
  std::fflush(stderr);
  // MPI_THREAD_MULTIPLE lets this thread abort while the engine's sits in MPI.
  MPI_Abort(MPI_COMM_WORLD, exit_code);
  std::_Exit(exit_code);  // MPI_Abort does not return; for odd MPIs
}

}  // namespace tessel::dist
