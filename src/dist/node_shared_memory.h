// Memory that every rank of a communicator maps at once: one POSIX shared
// memory segment, created by the group's rank 0 and mapped by all of them, so
// a write by one rank is a read for the others without a copy through MPI.
// FSDP's node-shared parameters live in it (fsdp_api.h, node_shared_params).
//
// Collective over `comm`. Every member must run on the same machine: their
// host names must be equal (pretend nodes in network and UTS namespaces count
// as different machines, although they share /dev/shm), and each member checks
// a random token rank 0 wrote, so a segment of the same name elsewhere is
// never taken for ours. The segment is unlinked as soon as all members have
// mapped it: nothing is left in /dev/shm, even when a rank dies; the memory
// goes back to the OS with the last mapping. Its pages are reserved up front
// (posix_fallocate), so a /dev/shm too small for it fails here, with a clear
// error on every rank, instead of a SIGBUS on first touch.
#pragma once

#include <c10/core/Allocator.h>

#include <cstddef>
#include <string>

#include "dist/communicator.h"

namespace tessel::dist {

// `bytes` of zeroed memory shared by every member of `comm` (page-aligned).
// `purpose` names the use in errors. Throws tessel::UsageError when the members
// are on different machines or /dev/shm cannot hold the segment.
c10::DataPtr allocate_node_shared(Communicator& comm, size_t bytes, const std::string& purpose);

}  // namespace tessel::dist
