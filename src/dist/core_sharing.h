// Whether the ranks running on one machine outnumber its cores. Ranks of one
// machine are those of one kernel, found by its boot id: pretend nodes
// (network and UTS namespaces on one host, scripts/cluster) have hostnames
// of their own but share one kernel and its cores, as containers on one host
// do; the node map (node_map.h), which goes by hostname, cannot tell.
//
// Why it matters: OpenMPI's blocking collectives spin on the CPU while they
// wait. Where every rank has a core that is the fastest wait (measured,
// docs/bench/comm.md); where ranks outnumber the cores, a spinning rank
// holds the core its late peer needs. Measured on 2 pretend nodes x 2 ranks
// on 2 cores (docs/bench/cluster.md): TP 2 x FSDP 2 took 0.89-1.36 s/step
// with the blocking calls and 0.58-0.60 s with the polled path, which
// yields the core between tests (progress_engine.cpp).
#pragma once

#include <string>
#include <vector>

namespace tessel::dist {

struct CoreSharing {
  int ranks_on_machine = 1;  // this rank included
  int cores = 1;             // CPUs this process may run on
  bool oversubscribed() const { return ranks_on_machine > cores; }
};

// This machine's identity: the kernel's boot id; "" where it cannot be read
// (then every rank counts as a machine of its own).
std::string this_machine_id();

// CPUs in this process's affinity mask (respects taskset and cgroup cpusets,
// unlike std::thread::hardware_concurrency, the fallback where the mask
// cannot be read); at least 1.
int usable_cores();

// From every rank's machine id (in rank order): how many share `my_rank`'s.
CoreSharing core_sharing(const std::vector<std::string>& machine_ids, int my_rank, int cores);

// This process's, as world() found it at start-up (world.cpp); a single
// process, or before world(): {1, usable_cores()}.
CoreSharing world_core_sharing();

}  // namespace tessel::dist
