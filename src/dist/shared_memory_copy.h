// How OpenMPI's shared-memory transport (btl vader) moves a large message
// between ranks of one node: with a single copy, the receiver reading the
// sender's memory through the kernel (CMA, process_vm_readv), or copied in
// and out of a shared buffer (two copies, and the sender waits for the
// buffer). Measured on 2 ranks of this project's 2-core machines
// (docs/bench/comm.md): reduce-scatter of 16-64 MiB 2.8x faster with CMA,
// all-reduce 1.5x; an FSDP-2 step of bench-medium 10-25% shorter.
//
// CMA needs the kernel to let one rank read another's memory. Containers
// often forbid it (a seccomp filter on the system call, or Yama's
// ptrace_scope >= 1, which forbids it between sibling processes), and
// OpenMPI then aborts at the first large message. So each rank checks before
// MPI starts, and asks for CMA only where it works. A value the user set
// (OMPI_MCA_btl_vader_single_copy_mechanism) is left as it is.
#pragma once

namespace tessel::dist {

// True when this process may read a sibling process's memory with
// process_vm_readv: the system call is permitted (tried on this process's
// own memory, which a seccomp filter blocks like any other) and Yama, where
// present, does not restrict it to descendants.
bool cross_process_copy_allowed();

// Sets OMPI_MCA_btl_vader_single_copy_mechanism to "cma" where
// cross_process_copy_allowed() and to "none" otherwise, unless the
// environment already names one. Call before MPI_Init. Returns the value
// in effect.
const char* choose_shared_memory_copy();

// Copies one shared-memory transfer makes with the mechanism ranks on this
// machine use (the environment's, else what choose_shared_memory_copy would
// pick): 1 with a single-copy mechanism, 2 with copy-in/copy-out ("none").
int shared_memory_copies_per_transfer();

}  // namespace tessel::dist
