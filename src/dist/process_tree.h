// The processes a launcher started, found through /proc. When a job must be
// ended by force (mpirun stuck waiting for a node it cannot reach), every
// process under it on this machine is ended, not only mpirun: its local ranks
// and the remote-shell clients that hold its other nodes' daemons.
#pragma once

#include <sys/types.h>

#include <vector>

namespace tessel::dist {

// Every live descendant of `root` (children, their children, ...), parents
// before their children; empty where /proc cannot be read.
std::vector<pid_t> descendants_of(pid_t root);

}  // namespace tessel::dist
