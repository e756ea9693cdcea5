// How tensors travel through MPI. Data movement uses an unsigned type of the
// element's width (bf16 and fp16 have no MPI type, and moving bits needs
// none); native MPI reductions exist only for the types MPI can add up.
#pragma once

#include "dist/mpi_c.h"

#include <c10/core/ScalarType.h>

#include <cstdint>

namespace tessel::dist {

struct MpiMoveType {
  MPI_Datatype type;
  int64_t units_per_element;  // > 1 only for elements wider than 8 bytes (complex)
};

MpiMoveType mpi_move_type(at::ScalarType dtype);

// MPI_FLOAT, MPI_DOUBLE, MPI_INT32_T, MPI_INT64_T; MPI_DATATYPE_NULL when MPI
// cannot reduce the dtype (bf16, fp16): those reduce locally in libtorch.
MPI_Datatype mpi_reduce_type(at::ScalarType dtype);

// MPI counts are int: throws tessel::Error naming the collective and group
// when `count` does not fit.
int mpi_count(int64_t count, const char* collective, const std::string& group);

}  // namespace tessel::dist
