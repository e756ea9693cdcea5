#include "dist/device_communicator.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>

#include <utility>
#include <vector>

#include "core/error.h"
#include "dist/caller_wait_time.h"

namespace tessel::dist {

CommunicatorPtr DeviceCollectives::split(int, int, const std::string& name) {
  throw Error(fmt::format(
      "group '{}': split a device group through its DeviceCommunicator (it splits the host "
      "group first and passes the child to split_like), not directly into '{}'",
      this->name(), name));
}

namespace {

// A collective run by the host communicator on host copies of device
// tensors: the results are copied back into the device tensors when waited
// for (the host copies live until then).
class StagedWork : public Work {
 public:
  StagedWork(WorkPtr host_work, std::vector<std::pair<at::Tensor, at::Tensor>> copy_back,
             std::vector<at::Tensor> inputs)
      : host_work_(std::move(host_work)),
        copy_back_(std::move(copy_back)),
        inputs_(std::move(inputs)) {}
  void wait() override {
    if (done_) return;
    const StagedWaitTimer timer;  // also the copy back: the device's time lost to staging
    host_work_->wait();
    at::NoGradGuard no_grad;
    for (auto& [device, host] : copy_back_) device.copy_(host);
    copy_back_.clear();
    inputs_.clear();
    done_ = true;
  }
  bool is_completed() override { return done_; }

 private:
  WorkPtr host_work_;
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back_;  // (device tensor, its host result)
  std::vector<at::Tensor> inputs_;
  bool done_ = false;
};

at::Tensor to_host(const at::Tensor& t) {
  return t.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
}

// A collective writing `out` from `in`, run by `host_call(out_h, in_h)` on
// host copies. `in` is copied first: it may lie inside `out` (or the other
// way round).
template <typename HostCall>
WorkPtr staged(const at::Tensor& out, const at::Tensor& in, HostCall&& host_call) {
  at::Tensor in_h = to_host(in);
  at::Tensor out_h = at::empty(out.sizes(), out.options().device(at::kCPU));
  WorkPtr work = host_call(out_h, in_h);
  return std::make_shared<StagedWork>(std::move(work),
                                      std::vector<std::pair<at::Tensor, at::Tensor>>{{out, out_h}},
                                      std::vector<at::Tensor>{std::move(in_h)});
}

// The same for a collective in place on `t`.
template <typename HostCall>
WorkPtr staged(const at::Tensor& t, HostCall&& host_call) {
  at::Tensor h = to_host(t);
  WorkPtr work = host_call(h);
  return std::make_shared<StagedWork>(std::move(work),
                                      std::vector<std::pair<at::Tensor, at::Tensor>>{{t, h}},
                                      std::vector<at::Tensor>{});
}

}  // namespace

DeviceCommunicator::DeviceCommunicator(CommunicatorPtr host,
                                       std::shared_ptr<DeviceCollectives> device)
    : host_(std::move(host)), device_(std::move(device)) {
  TESSEL_CHECK(host_ != nullptr, "a device communicator needs its group's host communicator");
  TESSEL_CHECK(!device_ || device_->size() == host_->size(),
               "group '{}': {} device ranks but {} host ranks", host_->name(),
               device_ ? device_->size() : 0, host_->size());
}

bool DeviceCommunicator::on_device(const char* collective,
                                   std::initializer_list<const at::Tensor*> tensors) const {
  int device = 0, host = 0;
  for (const at::Tensor* t : tensors) {
    if (!t->defined()) continue;
    (t->device().is_cpu() ? host : device) += 1;
  }
  TESSEL_CHECK(
      device == 0 || host == 0,
      "{} on group '{}': some tensors are on the CPU and some on a device; pass all on one",
      collective, name());
  return device > 0;
}

WorkPtr DeviceCommunicator::all_gather_into_async(const at::Tensor& out, const at::Tensor& in) {
  if (!on_device("all_gather", {&out, &in})) return host_->all_gather_into_async(out, in);
  if (device_) return device_->all_gather_into_async(out, in);
  return staged(out, in, [&](const at::Tensor& o, const at::Tensor& i) {
    return host_->all_gather_into_async(o, i);
  });
}

WorkPtr DeviceCommunicator::all_gather_into_in_order_async(const at::Tensor& out, const at::Tensor& in,
                                                           int64_t piece_bytes, int pieces_in_flight) {
  // Host tensors take MPI's ordered pieces; on a device NCCL keeps stream
  // order, and the staged path's copies order it already.
  if (!on_device("all_gather", {&out, &in}))
    return host_->all_gather_into_in_order_async(out, in, piece_bytes, pieces_in_flight);
  return all_gather_into_async(out, in);
}

WorkPtr DeviceCommunicator::all_gather_segments_async(const at::Tensor& out, const at::Tensor& in,
                                                      const std::vector<int64_t>& segment_numels) {
  if (!on_device("all_gather", {&out, &in}))
    return host_->all_gather_segments_async(out, in, segment_numels);
  if (device_) return device_->all_gather_segments_async(out, in, segment_numels);
  return staged(out, in, [&](const at::Tensor& o, const at::Tensor& i) {
    return host_->all_gather_segments_async(o, i, segment_numels);
  });
}

WorkPtr DeviceCommunicator::reduce_scatter_from_async(const at::Tensor& out, const at::Tensor& in,
                                                      ReduceOp op) {
  if (!on_device("reduce_scatter", {&out, &in}))
    return host_->reduce_scatter_from_async(out, in, op);
  if (device_) return device_->reduce_scatter_from_async(out, in, op);
  return staged(out, in, [&](const at::Tensor& o, const at::Tensor& i) {
    return host_->reduce_scatter_from_async(o, i, op);
  });
}

WorkPtr DeviceCommunicator::all_reduce_async(const at::Tensor& tensor, ReduceOp op) {
  if (!on_device("all_reduce", {&tensor})) return host_->all_reduce_async(tensor, op);
  if (device_) return device_->all_reduce_async(tensor, op);
  return staged(tensor, [&](const at::Tensor& h) { return host_->all_reduce_async(h, op); });
}

WorkPtr DeviceCommunicator::all_to_all_async(const at::Tensor& out, const at::Tensor& in) {
  if (!on_device("all_to_all", {&out, &in})) return host_->all_to_all_async(out, in);
  if (device_) return device_->all_to_all_async(out, in);
  return staged(out, in, [&](const at::Tensor& o, const at::Tensor& i) {
    return host_->all_to_all_async(o, i);
  });
}

WorkPtr DeviceCommunicator::all_to_all_v_async(const at::Tensor& out,
                                               const std::vector<int64_t>& out_counts,
                                               const at::Tensor& in,
                                               const std::vector<int64_t>& in_counts) {
  if (!on_device("all_to_all", {&out, &in}))
    return host_->all_to_all_v_async(out, out_counts, in, in_counts);
  if (device_) return device_->all_to_all_v_async(out, out_counts, in, in_counts);
  return staged(out, in, [&](const at::Tensor& o, const at::Tensor& i) {
    return host_->all_to_all_v_async(o, out_counts, i, in_counts);
  });
}

WorkPtr DeviceCommunicator::broadcast_async(const at::Tensor& tensor, int root) {
  if (!on_device("broadcast", {&tensor})) return host_->broadcast_async(tensor, root);
  if (device_) return device_->broadcast_async(tensor, root);
  return staged(tensor, [&](const at::Tensor& h) { return host_->broadcast_async(h, root); });
}

WorkPtr DeviceCommunicator::ring_shift_async(const at::Tensor& out, const at::Tensor& in) {
  if (!on_device("ring_shift", {&out, &in})) return host_->ring_shift_async(out, in);
  if (device_) return device_->ring_shift_async(out, in);
  return staged(out, in, [&](const at::Tensor& o, const at::Tensor& i) {
    return host_->ring_shift_async(o, i);
  });
}

void DeviceCommunicator::all_gather_into(const at::Tensor& out, const at::Tensor& in) {
  if (!on_device("all_gather", {&out, &in})) return host_->all_gather_into(out, in);
  all_gather_into_async(out, in)->wait();
}

void DeviceCommunicator::reduce_scatter_from(const at::Tensor& out, const at::Tensor& in,
                                             ReduceOp op) {
  if (!on_device("reduce_scatter", {&out, &in})) return host_->reduce_scatter_from(out, in, op);
  reduce_scatter_from_async(out, in, op)->wait();
}

void DeviceCommunicator::all_reduce(const at::Tensor& tensor, ReduceOp op) {
  if (!on_device("all_reduce", {&tensor})) return host_->all_reduce(tensor, op);
  all_reduce_async(tensor, op)->wait();
}

void DeviceCommunicator::all_to_all(const at::Tensor& out, const at::Tensor& in) {
  if (!on_device("all_to_all", {&out, &in})) return host_->all_to_all(out, in);
  all_to_all_async(out, in)->wait();
}

void DeviceCommunicator::all_to_all_v(const at::Tensor& out, const std::vector<int64_t>& out_counts,
                                      const at::Tensor& in, const std::vector<int64_t>& in_counts) {
  if (!on_device("all_to_all", {&out, &in}))
    return host_->all_to_all_v(out, out_counts, in, in_counts);
  all_to_all_v_async(out, out_counts, in, in_counts)->wait();
}

void DeviceCommunicator::broadcast(const at::Tensor& tensor, int root) {
  if (!on_device("broadcast", {&tensor})) return host_->broadcast(tensor, root);
  broadcast_async(tensor, root)->wait();
}

CommunicatorPtr DeviceCommunicator::split(int color, int key, const std::string& name) {
  CommunicatorPtr host_child = host_->split(color, key, name);
  std::shared_ptr<DeviceCollectives> device_child =
      device_ ? device_->split_like(*host_child, color, key, name) : nullptr;
  return std::make_shared<DeviceCommunicator>(std::move(host_child), std::move(device_child));
}

void DeviceCommunicator::set_timeout(std::chrono::milliseconds timeout) {
  host_->set_timeout(timeout);
  if (device_) device_->set_timeout(timeout);
}

CollectiveCounters DeviceCommunicator::counters() const {
  CollectiveCounters sum = host_->counters();
  if (!device_) return sum;
  const CollectiveCounters d = device_->counters();
  for (int i = 0; i < kNumCollectiveKinds; ++i) {
    sum.calls[i] += d.calls[i];
    sum.bytes[i] += d.bytes[i];
    sum.sent_same_node[i] += d.sent_same_node[i];
    sum.sent_other_node[i] += d.sent_other_node[i];
  }
  return sum;
}

void DeviceCommunicator::reset_counters() {
  host_->reset_counters();
  if (device_) device_->reset_counters();
}

std::string DeviceCommunicator::device_path() const {
  return device_ ? device_->backend()
                 : std::string("MPI, device tensors staged through host memory");
}

}  // namespace tessel::dist
