// The MPI C API without OpenMPI's deprecated C++ bindings: including <mpi.h>
// from C++ otherwise pulls in MPI:: classes whose symbols live in a library
// tessel does not link (libmpi_cxx). Include this instead of <mpi.h>.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
