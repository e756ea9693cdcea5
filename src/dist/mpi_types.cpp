#include "dist/mpi_types.h"

#include <climits>
#include <string>

#include "core/error.h"

namespace tessel::dist {

MpiMoveType mpi_move_type(at::ScalarType dtype) {
  const int64_t width = static_cast<int64_t>(c10::elementSize(dtype));
  switch (width) {
    case 1: return {MPI_BYTE, 1};
    case 2: return {MPI_UINT16_T, 1};
    case 4: return {MPI_UINT32_T, 1};
    case 8: return {MPI_UINT64_T, 1};
    default:
      TESSEL_CHECK(width % 8 == 0, "dtype {} has element width {} bytes, which tessel cannot move",
                   c10::toString(dtype), width);
      return {MPI_UINT64_T, width / 8};
  }
}

MPI_Datatype mpi_reduce_type(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return MPI_FLOAT;
    case at::kDouble: return MPI_DOUBLE;
    case at::kInt: return MPI_INT32_T;
    case at::kLong: return MPI_INT64_T;
    default: return MPI_DATATYPE_NULL;
  }
}

int mpi_count(int64_t count, const char* collective, const std::string& group) {
  TESSEL_CHECK(count <= INT_MAX,
               "{} on group '{}': {} MPI elements exceed MPI's int count limit {}; split the "
               "tensor into smaller collectives",
               collective, group, count, INT_MAX);
  return static_cast<int>(count);
}

}  // namespace tessel::dist
