// NCCL's collectives for one group (dist/nccl_collectives.h): each call is
// checked and counted as on every backend, then issued onto the group's own
// stream, ordered after the computation so far (dist/stream_ordered_work.h).
// Pure data movement (all-gather, all-to-all, broadcast, the ring shift)
// moves bytes, so any dtype goes; reductions take NCCL's dtype of the tensor.
// Several calls of one collective (the segments of FSDP's gather, an
// all-to-all's sends and receives) are one NCCL group: one launch.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <fmt/format.h>
#include <nccl.h>

#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "device/backend.h"
#include "device/cuda/cuda_stream.h"
#include "dist/communicator_base.h"
#include "dist/nccl_collectives.h"
#include "dist/stream_ordered_work.h"
#include "dist/validation.h"

namespace tessel::dist {
namespace {

std::string version_string(int code) {
  // NCCL_VERSION(X,Y,Z) = X*10000 + Y*100 + Z since 2.9.
  return fmt::format("{}.{}.{}", code / 10000, (code / 100) % 100, code % 100);
}

void check_nccl(ncclResult_t result, const char* call, const std::string& group,
                ncclComm_t comm = nullptr) {
  if (result == ncclSuccess || result == ncclInProgress) return;
  const char* detail = comm != nullptr ? ncclGetLastError(comm) : nullptr;
  throw Error(fmt::format(
      "NCCL: {} on group '{}' failed: {}{}{}", call, group, ncclGetErrorString(result),
      detail != nullptr && *detail != '\0' ? ": " : "", detail != nullptr ? detail : ""));
}

ncclDataType_t reduce_type(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat:
      return ncclFloat32;
    case at::kDouble:
      return ncclFloat64;
    case at::kHalf:
      return ncclFloat16;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kInt:
      return ncclInt32;
    case at::kLong:
      return ncclInt64;
    default:
      throw Error(fmt::format("NCCL cannot reduce dtype {}", c10::toString(dtype)));
  }
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::Sum ? ncclSum : ncclMax; }

// The calls `issue_calls` makes as one NCCL group: one launch. A call that
// fails still closes the group before its error propagates.
template <typename Calls>
void as_one_group(const std::string& group, Calls&& issue_calls) {
  check_nccl(ncclGroupStart(), "ncclGroupStart", group);
  try {
    issue_calls();
  } catch (...) {
    (void)ncclGroupEnd();
    throw;
  }
  check_nccl(ncclGroupEnd(), "ncclGroupEnd", group);
}

const std::byte* bytes(const at::Tensor& t) { return static_cast<const std::byte*>(t.data_ptr()); }
std::byte* mutable_bytes(const at::Tensor& t) { return static_cast<std::byte*>(t.data_ptr()); }

void check_cuda_tensor(const char* collective, const std::string& group, const at::Tensor& t,
                       int device) {
  TESSEL_CHECK(
      !t.defined() || (t.device().is_cuda() && t.device().index() == device),
      "{} on group '{}': a tensor on {}, but this group's NCCL communicator runs on cuda:{}",
      collective, group, t.device().str(), device);
}

class NcclCollectives : public DeviceCollectives {
 public:
  // `name`: the group's name as its creator gave it (CommunicatorBase adds
  // the ranks); `host`: the same group's host communicator.
  NcclCollectives(ncclComm_t comm, int device, const Communicator& host, const std::string& name,
                  std::shared_ptr<CollectiveWatch> watch)
      : DeviceCollectives(host.rank(), host.world_ranks(), name, host.timeout(), host_nodes(host)),
        comm_(comm),
        device_(device),
        stream_(device::cuda_backend()->stream_ops(), std::move(watch)) {
    health_ = stream_.watch()->add_health_check([comm = comm_,
                                                 name = this->name()]() -> std::string {
      ncclResult_t async = ncclSuccess;
      if (ncclCommGetAsyncError(comm, &async) != ncclSuccess || async == ncclSuccess ||
          async == ncclInProgress) {
        return {};
      }
      return fmt::format(
          "tessel: NCCL reports an error on group '{}': {}: {}; a peer process likely failed or "
          "its link broke",
          name, ncclGetErrorString(async), ncclGetLastError(comm));
    });
  }
  ~NcclCollectives() override {
    stream_.watch()->forget_health_check(health_);
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    // ncclCommDestroy finalizes the communicator, which waits for its peers: a
    // rank unwinding from an error (its mesh and world are locals of the
    // command) would hang there, before its error is printed, while its peers
    // wait in their next collective. Unwinding, the communicator is aborted
    // instead, which is local; every rank of a job that ends well destroys its
    // communicators in the same order.
    if (std::uncaught_exceptions() > 0) {
      (void)ncclCommAbort(comm_);
    } else {
      (void)ncclCommDestroy(comm_);
    }
  }
  NcclCollectives(const NcclCollectives&) = delete;
  NcclCollectives& operator=(const NcclCollectives&) = delete;

  std::string backend() const override { return "NCCL " + nccl_info().version; }

  WorkPtr all_gather_into_async(const at::Tensor& out, const at::Tensor& in) override {
    check_all_gather(name(), size(), rank(), out, in);
    on_my_device("all_gather", {out, in});
    record(CollectiveKind::AllGather, static_cast<int64_t>(in.nbytes()));
    record_sends_to_each_peer(CollectiveKind::AllGather, static_cast<int64_t>(in.nbytes()));
    return issue("all_gather", {out, in}, [=, this](cudaStream_t s) {
      if (in.nbytes() == 0) return;
      check_nccl(ncclAllGather(bytes(in), mutable_bytes(out), in.nbytes(), ncclUint8, comm_, s),
                 "ncclAllGather", name(), comm_);
    });
  }

  WorkPtr all_gather_segments_async(const at::Tensor& out, const at::Tensor& in,
                                    const std::vector<int64_t>& segment_numels) override {
    check_all_gather_segments(name(), size(), rank(), out, in, segment_numels);
    on_my_device("all_gather", {out, in});
    record(CollectiveKind::AllGather, static_cast<int64_t>(in.nbytes()));
    record_sends_to_each_peer(CollectiveKind::AllGather, static_cast<int64_t>(in.nbytes()));
    const auto item = static_cast<size_t>(in.element_size());
    return issue("all_gather", {out, in}, [=, this](cudaStream_t s) {
      // Segment i of `in` is gathered rank-major into its own region of `out`.
      as_one_group(name(), [&] {
        size_t from = 0, to = 0;
        for (const int64_t numel : segment_numels) {
          const size_t n = static_cast<size_t>(numel) * item;
          if (n > 0) {
            check_nccl(
                ncclAllGather(bytes(in) + from, mutable_bytes(out) + to, n, ncclUint8, comm_, s),
                "ncclAllGather", name(), comm_);
          }
          from += n;
          to += n * static_cast<size_t>(size());
        }
      });
    });
  }

  WorkPtr reduce_scatter_from_async(const at::Tensor& out, const at::Tensor& in,
                                    ReduceOp op) override {
    check_reduce_scatter(name(), size(), out, in);
    on_my_device("reduce_scatter", {out, in});
    record(CollectiveKind::ReduceScatter, static_cast<int64_t>(in.nbytes()));
    record_sends_to_each_peer(CollectiveKind::ReduceScatter, static_cast<int64_t>(out.nbytes()));
    const ncclDataType_t type = reduce_type(in.scalar_type());
    // NCCL reduces in place only into this rank's own slot of the input; an
    // output overlapping it anywhere else goes through a buffer of its own.
    const bool own_slot = bytes(out) == bytes(in) + static_cast<size_t>(rank()) * out.nbytes();
    const at::Tensor target = bytes_overlap(out, in) && !own_slot ? at::empty_like(out) : out;
    return issue("reduce_scatter", {out, in, target}, [=, this](cudaStream_t s) {
      if (out.numel() == 0) return;
      check_nccl(ncclReduceScatter(in.data_ptr(), target.data_ptr(),
                                   static_cast<size_t>(out.numel()), type, nccl_op(op), comm_, s),
                 "ncclReduceScatter", name(), comm_);
      if (!target.is_same(out)) copy_on(s, out, target);
    });
  }

  WorkPtr all_reduce_async(const at::Tensor& tensor, ReduceOp op) override {
    check_all_reduce(name(), tensor);
    on_my_device("all_reduce", {tensor});
    record(CollectiveKind::AllReduce, static_cast<int64_t>(tensor.nbytes()));
    record_all_reduce_sends(tensor.numel(), static_cast<int64_t>(tensor.element_size()));
    const ncclDataType_t type = reduce_type(tensor.scalar_type());
    return issue("all_reduce", {tensor}, [=, this](cudaStream_t s) {
      if (tensor.numel() == 0) return;
      check_nccl(ncclAllReduce(tensor.data_ptr(), tensor.data_ptr(),
                               static_cast<size_t>(tensor.numel()), type, nccl_op(op), comm_, s),
                 "ncclAllReduce", name(), comm_);
    });
  }

  WorkPtr all_to_all_async(const at::Tensor& out, const at::Tensor& in) override {
    check_all_to_all(name(), size(), out, in);
    on_my_device("all_to_all", {out, in});
    record(CollectiveKind::AllToAll, static_cast<int64_t>(in.nbytes()));
    record_sends_to_each_peer(CollectiveKind::AllToAll, static_cast<int64_t>(in.nbytes()) / size());
    return issue("all_to_all", {out, in}, [=, this](cudaStream_t s) {
      const size_t part = in.nbytes() / static_cast<size_t>(size());
      if (part == 0) return;
      as_one_group(name(), [&] {
        for (int peer = 0; peer < size(); ++peer) {
          const size_t at = static_cast<size_t>(peer) * part;
          check_nccl(ncclSend(bytes(in) + at, part, ncclUint8, peer, comm_, s), "ncclSend", name(),
                     comm_);
          check_nccl(ncclRecv(mutable_bytes(out) + at, part, ncclUint8, peer, comm_, s), "ncclRecv",
                     name(), comm_);
        }
      });
    });
  }

  WorkPtr all_to_all_v_async(const at::Tensor& out, const std::vector<int64_t>& out_counts,
                             const at::Tensor& in, const std::vector<int64_t>& in_counts) override {
    const int64_t row = check_all_to_all_v(name(), size(), out, out_counts, in, in_counts);
    on_my_device("all_to_all", {out, in});
    record(CollectiveKind::AllToAll, static_cast<int64_t>(in.nbytes()));
    std::vector<int64_t> to_member(in_counts.size());
    for (size_t r = 0; r < in_counts.size(); ++r) to_member[r] = in_counts[r] * row;
    record_sends(CollectiveKind::AllToAll, to_member, static_cast<int64_t>(in.element_size()));
    const auto row_bytes = static_cast<size_t>(row * static_cast<int64_t>(in.element_size()));
    return issue("all_to_all", {out, in}, [=, this](cudaStream_t s) {
      as_one_group(name(), [&] {
        size_t send_at = 0, recv_at = 0;
        for (int peer = 0; peer < size(); ++peer) {
          const size_t send = static_cast<size_t>(in_counts[static_cast<size_t>(peer)]) * row_bytes;
          const size_t receive =
              static_cast<size_t>(out_counts[static_cast<size_t>(peer)]) * row_bytes;
          if (send > 0) {
            check_nccl(ncclSend(bytes(in) + send_at, send, ncclUint8, peer, comm_, s), "ncclSend",
                       name(), comm_);
          }
          if (receive > 0) {
            check_nccl(ncclRecv(mutable_bytes(out) + recv_at, receive, ncclUint8, peer, comm_, s),
                       "ncclRecv", name(), comm_);
          }
          send_at += send;
          recv_at += receive;
        }
      });
    });
  }

  WorkPtr broadcast_async(const at::Tensor& tensor, int root) override {
    check_broadcast(name(), size(), tensor, root);
    on_my_device("broadcast", {tensor});
    record(CollectiveKind::Broadcast, static_cast<int64_t>(tensor.nbytes()));
    if (rank() == root)
      record_sends_to_each_peer(CollectiveKind::Broadcast, static_cast<int64_t>(tensor.nbytes()));
    return issue("broadcast", {tensor}, [=, this](cudaStream_t s) {
      if (tensor.nbytes() == 0) return;
      check_nccl(ncclBroadcast(tensor.data_ptr(), tensor.data_ptr(), tensor.nbytes(), ncclUint8,
                               root, comm_, s),
                 "ncclBroadcast", name(), comm_);
    });
  }

  WorkPtr barrier_async() override {
    throw Error(fmt::format(
        "group '{}': barriers are the host communicator's (DeviceCommunicator routes them)",
        name()));
  }

  WorkPtr ring_shift_async(const at::Tensor& out, const at::Tensor& in) override {
    check_ring_shift(name(), out, in);
    on_my_device("ring_shift", {out, in});
    record(CollectiveKind::RingShift, static_cast<int64_t>(in.nbytes()));
    const int next = (rank() + 1) % size();
    const int previous = (rank() + size() - 1) % size();
    std::vector<int64_t> to_member(static_cast<size_t>(size()), 0);
    to_member[static_cast<size_t>(next)] = in.numel();
    record_sends(CollectiveKind::RingShift, to_member, static_cast<int64_t>(in.element_size()));
    return issue("ring_shift", {out, in}, [=, this](cudaStream_t s) {
      if (in.nbytes() == 0) return;
      as_one_group(name(), [&] {
        check_nccl(ncclSend(bytes(in), in.nbytes(), ncclUint8, next, comm_, s), "ncclSend", name(),
                   comm_);
        check_nccl(ncclRecv(mutable_bytes(out), in.nbytes(), ncclUint8, previous, comm_, s),
                   "ncclRecv", name(), comm_);
      });
    });
  }

  std::shared_ptr<DeviceCollectives> split_like(const Communicator& host_child, int color, int key,
                                                const std::string& name) override {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    ncclComm_t child = nullptr;
    check_nccl(ncclCommSplit(comm_, color, key, &child, nullptr), "ncclCommSplit",
               host_child.name(), comm_);
    TESSEL_CHECK(child != nullptr,
                 "NCCL: ncclCommSplit of group '{}' gave no communicator for '{}'", this->name(),
                 host_child.name());
    return std::make_shared<NcclCollectives>(child, device_, host_child, name, stream_.watch());
  }

 private:
  static std::shared_ptr<const NodeMap> host_nodes(const Communicator& host) {
    const auto* base = dynamic_cast<const CommunicatorBase*>(&host);
    return base != nullptr ? base->node_map() : nullptr;
  }

  void on_my_device(const char* collective, std::initializer_list<at::Tensor> tensors) const {
    for (const at::Tensor& t : tensors) check_cuda_tensor(collective, name(), t, device_);
  }

  // A copy on the collective's stream, after what it did there.
  static void copy_on(cudaStream_t s, const at::Tensor& to, const at::Tensor& from) {
    const cudaError_t status =
        cudaMemcpyAsync(to.data_ptr(), from.data_ptr(), from.nbytes(), cudaMemcpyDeviceToDevice, s);
    TESSEL_CHECK(status == cudaSuccess, "CUDA: cudaMemcpyAsync failed: {}",
                 cudaGetErrorString(status));
  }

  WorkPtr issue(const char* collective, std::vector<at::Tensor> tensors,
                const std::function<void(cudaStream_t)>& launch) {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_));
    return stream_.issue(collective, name(), timeout(), std::move(tensors),
                         [&](const device::Stream& s) { launch(device::cuda_stream(s)); });
  }

  ncclComm_t comm_;
  int device_;
  CollectiveStream stream_;
  uint64_t health_ = 0;
};

}  // namespace

NcclInfo nccl_info() {
  NcclInfo info;
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) {
    info.reason = "ncclGetVersion failed";
    return info;
  }
  info.available = true;
  info.version_code = code;
  info.version = version_string(code);
  return info;
}

std::shared_ptr<DeviceCollectives> make_nccl_world(Communicator& host_world, int device_index,
                                                   std::shared_ptr<CollectiveWatch> watch) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device_index));
  ncclUniqueId id{};
  if (host_world.rank() == 0)
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId", host_world.name());
  // The id travels over the host world (MPI stays the bootstrap).
  at::Tensor shared = at::empty({static_cast<int64_t>(sizeof(id))}, at::kByte);
  std::memcpy(shared.data_ptr(), &id, sizeof(id));
  host_world.broadcast(shared, 0);
  std::memcpy(&id, shared.data_ptr(), sizeof(id));
  ncclComm_t comm = nullptr;
  check_nccl(ncclCommInitRank(&comm, host_world.size(), id, host_world.rank()), "ncclCommInitRank",
             host_world.name());
  return std::make_shared<NcclCollectives>(comm, device_index, host_world, "world",
                                           std::move(watch));
}

}  // namespace tessel::dist
