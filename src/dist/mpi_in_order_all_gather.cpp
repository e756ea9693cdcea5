// MpiCommunicator::all_gather_into_in_order_async (communicator.h): an
// all-gather sent as point-to-point pieces with a bounded number posted, so
// that gathers issued back to back on one group arrive one after another in
// issue order at the link's full rate. Posted as MPI all-gathers they share
// the link fragment by fragment and all arrive together at the end (issue
// 43, docs/bench/cluster.md). Kept apart from mpi_communicator.cpp's
// collective algorithms: it is the one that schedules its own pieces.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <vector>

#include "core/error.h"
#include "dist/mpi_communicator.h"
#include "dist/mpi_types.h"
#include "dist/validation.h"

namespace tessel::dist {

WorkPtr MpiCommunicator::all_gather_into_in_order_async(const at::Tensor& out, const at::Tensor& in,
                                                        int64_t piece_bytes, int pieces_in_flight) {
  check_all_gather(name(), size(), rank(), out, in);
  check_cpu("all_gather", name(), out, "out");
  check_cpu("all_gather", name(), in, "in");
  TESSEL_CHECK(piece_bytes > 0 && pieces_in_flight > 0,
               "all_gather in order on group '{}': piece_bytes {} and pieces_in_flight {} must be positive", name(),
               piece_bytes, pieces_in_flight);
  record(CollectiveKind::AllGather, static_cast<int64_t>(in.nbytes()));
  record_sends_to_each_peer(CollectiveKind::AllGather, static_cast<int64_t>(in.nbytes()));
  const MpiMoveType mt = mpi_move_type(in.scalar_type());
  const int64_t numel = in.numel();
  const int64_t element_bytes = static_cast<int64_t>(in.element_size());
  // Whole elements per piece, and a piece's count must fit MPI's int.
  const int64_t piece = std::max<int64_t>(1, piece_bytes / element_bytes);
  mpi_count(std::min(piece, numel) * mt.units_per_element, "all_gather", name());
  mpi_count(out.numel() * mt.units_per_element, "all_gather", name());
  const int group_size = size();
  const int me = rank();
  auto* gathered = static_cast<std::byte*>(out.data_ptr());
  auto* own = gathered + me * numel * element_bytes;  // this rank's slot of `out`
  const auto* source = static_cast<const std::byte*>(in.data_ptr());
  const bool in_place = numel > 0 && source == own;
  MPI_Comm comm = comm_;
  // Pieces of one (source, tag, communicator) match in posting order, and
  // every rank posts a group's pieces, and the group's gathers, in the same
  // order: one tag serves them all. The lane starts the next gather once this
  // one has posted its last piece, so the in-flight window slides on across
  // gathers issued back to back.
  constexpr int kTag = 29;
  // The tensors ride along in the job so they outlive it whatever the caller does.
  return submit("all_gather", false, nullptr, [=, keep_in = in, keep_out = out](Progress& p) -> CommJob {
    if (numel == 0) co_return;
    if (!in_place) std::memcpy(own, source, static_cast<size_t>(numel * element_bytes));
    std::deque<std::vector<MPI_Request>> in_flight;
    for (int64_t begin = 0; begin < numel; begin += piece) {
      const int64_t length = std::min(piece, numel - begin);
      const int count = static_cast<int>(length * mt.units_per_element);
      std::vector<MPI_Request> requests;
      for (int peer = 0; peer < group_size; ++peer) {
        if (peer == me) continue;
        MPI_Request receive, send;
        MPI_Irecv(gathered + (peer * numel + begin) * element_bytes, count, mt.type, peer, kTag, comm, &receive);
        MPI_Isend(own + begin * element_bytes, count, mt.type, peer, kTag, comm, &send);
        requests.push_back(receive);
        requests.push_back(send);
      }
      in_flight.push_back(std::move(requests));
      const bool last = begin + piece >= numel;
      if (last) p.done_posting();
      while (!in_flight.empty() && (last || static_cast<int>(in_flight.size()) >= pieces_in_flight)) {
        for (MPI_Request& r : in_flight.front()) co_await p.wait(r);
        in_flight.pop_front();
      }
    }
  });
}

}  // namespace tessel::dist
