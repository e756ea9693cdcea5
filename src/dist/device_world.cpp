#include "dist/device_world.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "device/backend.h"
#include "dist/collective_watch.h"
#include "dist/communicator_base.h"
#include "dist/device_communicator.h"

namespace tessel::dist {
namespace {

constexpr int kNcclMultiRankPerGpu = 23000;  // 2.30.0: two ranks per GPU behind a switch
constexpr int kMultiRankLimit = 2;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

// A non-negative integer from the environment, or -1 when unset or not one.
int env_count(const char* name) {
  const std::string v = env(name);
  if (v.empty()) return -1;
  char* end = nullptr;
  const long n = std::strtol(v.c_str(), &end, 10);
  return (end != v.c_str() && *end == '\0' && n >= 0 && n < (1 << 20)) ? static_cast<int>(n) : -1;
}

}  // namespace

DeviceCommRequest parse_device_comm_request(std::string_view value) {
  if (value.empty() || value == "auto") return DeviceCommRequest::Auto;
  if (value == "nccl") return DeviceCommRequest::Nccl;
  if (value == "mpi") return DeviceCommRequest::Mpi;
  throw UsageError(fmt::format(
      "TESSEL_COMM='{}' is not a device communication path; use auto (NCCL where it can "
      "serve), nccl, or mpi (device tensors staged through host memory)",
      value));
}

DeviceCommChoice choose_device_comm(DeviceCommRequest request, const NcclInfo& nccl,
                                    int ranks_per_device, bool multi_rank_switch) {
  if (request == DeviceCommRequest::Mpi)
    return {false, "TESSEL_COMM=mpi: device tensors staged through host memory"};
  std::string refusal;
  if (!nccl.available) {
    refusal = nccl.reason;
  } else if (ranks_per_device > 1) {
    const bool allowed = nccl.version_code >= kNcclMultiRankPerGpu && multi_rank_switch &&
                         ranks_per_device <= kMultiRankLimit;
    if (!allowed) {
      refusal = fmt::format(
          "{} ranks share a GPU and NCCL {} does not allow that (it takes NCCL 2.30 or later with "
          "NCCL_MULTI_RANK_GPU_ENABLE=1, and at most {} ranks per GPU)",
          ranks_per_device, nccl.version, kMultiRankLimit);
    }
  }
  if (!refusal.empty()) {
    if (request == DeviceCommRequest::Nccl) {
      throw UsageError(
          fmt::format("TESSEL_COMM=nccl, but {}; use TESSEL_COMM=mpi or auto", refusal));
    }
    return {false, refusal + ": device tensors go through MPI, staged in host memory"};
  }
  if (ranks_per_device > 1) {
    return {true, fmt::format("NCCL {} ({} ranks per GPU, NCCL_MULTI_RANK_GPU_ENABLE=1)",
                              nccl.version, ranks_per_device)};
  }
  return {true, fmt::format("NCCL {}", nccl.version)};
}

device::NodePlacement node_placement(const Communicator& world) {
  const std::pair<const char*, const char*> launchers[] = {
      {"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
      {"LOCAL_RANK", "LOCAL_WORLD_SIZE"},
  };
  for (const auto& [rank_var, size_var] : launchers) {
    const int rank = env_count(rank_var), size = env_count(size_var);
    if (rank >= 0 && size > rank) return {rank, size};
  }
  device::NodePlacement placement;
  const auto* base = dynamic_cast<const CommunicatorBase*>(&world);
  if (base == nullptr || !base->node_map()) return placement;
  const NodeMap& nodes = *base->node_map();
  const int me = world.world_ranks()[static_cast<size_t>(world.rank())];
  placement.local_size = 0;
  for (int r = 0; r < nodes.world_size(); ++r) {
    if (!nodes.same_node(r, me)) continue;
    if (r < me) placement.local_rank += 1;
    placement.local_size += 1;
  }
  return placement;
}

DeviceEnvironment device_environment() {
  DeviceEnvironment e;
  e.device = device::parse_device_request(env("TESSEL_DEVICE"));
  e.comm = parse_device_comm_request(env("TESSEL_COMM"));
  const std::string shared = env("TESSEL_ALLOW_SHARED_GPU");
  if (!shared.empty() && shared != "0" && shared != "1") {
    throw UsageError(fmt::format("TESSEL_ALLOW_SHARED_GPU='{}' is not 0 or 1", shared));
  }
  e.allow_shared = shared == "1";
  return e;
}

DeviceWorld setup_device_world(CommunicatorPtr host_world) {
  const DeviceEnvironment settings = device_environment();
  const device::NodePlacement placement = node_placement(*host_world);
  const int devices = device::cuda_device_count();
  const device::RankDevice chosen = device::choose_rank_device(
      settings.device, placement, devices, settings.allow_shared, device::no_cuda_reason());
  // Every rank must agree on the kind of device and on the device path: each
  // says what it chose, the world takes the most demanding.
  const int ranks_per_device =
      chosen.device.is_cuda() ? (placement.local_size + devices - 1) / std::max(devices, 1) : 0;
  at::Tensor votes = at::tensor(
      {static_cast<int64_t>(chosen.device.is_cuda() ? 1 : 0),
       static_cast<int64_t>(ranks_per_device), -static_cast<int64_t>(chosen.device.is_cuda())},
      at::kLong);
  host_world->all_reduce(votes, ReduceOp::Max);
  const bool any_cuda = votes[0].item<int64_t>() == 1, all_cuda = votes[2].item<int64_t>() == -1;
  if (any_cuda != all_cuda) {
    throw UsageError(fmt::format(
        "some ranks found a CUDA device and some did not (this rank: {}); give every node "
        "the same devices, or set TESSEL_DEVICE=cpu",
        chosen.reason));
  }
  DeviceWorld out;
  out.device = chosen.device;
  out.log_lines.push_back(fmt::format("device {}: {}", chosen.device.str(), chosen.reason));
  if (!chosen.device.is_cuda()) {
    out.world = std::move(host_world);
    return out;
  }
  const device::Backend& cuda = *device::cuda_backend();
  cuda.set_current_device(chosen.device.index());
  out.log_lines.push_back(fmt::format("cuda:{} is {}", static_cast<int>(chosen.device.index()),
                                      cuda.describe(chosen.device.index())));
  const DeviceCommChoice comm =
      choose_device_comm(settings.comm, nccl_info(), static_cast<int>(votes[1].item<int64_t>()),
                         env("NCCL_MULTI_RANK_GPU_ENABLE") == "1");
  out.log_lines.push_back("device collectives: " + comm.reason);
  std::shared_ptr<DeviceCollectives> nccl;
  if (comm.nccl) {
    const int world_rank = host_world->world_ranks()[static_cast<size_t>(host_world->rank())];
    nccl = make_nccl_world(*host_world, chosen.device.index(),
                           std::make_shared<CollectiveWatch>(world_rank));
  }
  out.world = std::make_shared<DeviceCommunicator>(std::move(host_world), std::move(nccl));
  return out;
}

}  // namespace tessel::dist
