// How a DeviceCommunicator routes collectives (dist/device_communicator.h):
// host tensors to the group's host communicator, device tensors to the
// device collectives, a mix refused; a split splits both with the same color,
// key and name; counters add both paths. Device tensors here are meta
// tensors (not CPU, no memory) and the device collectives a recording fake,
// so the routing is tested without a GPU; the real NCCL path is tested on
// one (tests/gpu/).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "dist/device_communicator.h"
#include "dist/single_process_communicator.h"
#include "dist/work.h"

namespace tessel::dist {
namespace {

class RecordingCollectives : public DeviceCollectives {
 public:
  RecordingCollectives(const std::string& name, std::shared_ptr<std::vector<std::string>> log)
      : DeviceCollectives(0, {0}, name, std::chrono::seconds(300)), log_(std::move(log)) {}

  WorkPtr all_gather_into_async(const at::Tensor&, const at::Tensor& in) override {
    return note("all_gather", in);
  }
  WorkPtr all_gather_segments_async(const at::Tensor&, const at::Tensor& in,
                                    const std::vector<int64_t>&) override {
    return note("all_gather_segments", in);
  }
  WorkPtr reduce_scatter_from_async(const at::Tensor&, const at::Tensor& in, ReduceOp) override {
    return note("reduce_scatter", in);
  }
  WorkPtr all_reduce_async(const at::Tensor& t, ReduceOp) override { return note("all_reduce", t); }
  WorkPtr all_to_all_async(const at::Tensor&, const at::Tensor& in) override {
    return note("all_to_all", in);
  }
  WorkPtr all_to_all_v_async(const at::Tensor&, const std::vector<int64_t>&, const at::Tensor& in,
                             const std::vector<int64_t>&) override {
    return note("all_to_all_v", in);
  }
  WorkPtr broadcast_async(const at::Tensor& t, int) override { return note("broadcast", t); }
  WorkPtr barrier_async() override { return note("barrier", at::Tensor()); }
  WorkPtr ring_shift_async(const at::Tensor&, const at::Tensor& in) override {
    return note("ring_shift", in);
  }
  std::shared_ptr<DeviceCollectives> split_like(const Communicator& host_child, int color, int key,
                                                const std::string& name) override {
    log_->push_back(fmt::format("split {} {} {} like {}", color, key, name, host_child.name()));
    return std::make_shared<RecordingCollectives>(name, log_);
  }
  std::string backend() const override { return "recording"; }

 private:
  WorkPtr note(const std::string& what, const at::Tensor& t) {
    record(CollectiveKind::AllReduce, 1);
    log_->push_back(what + " on " + name() + (t.defined() ? " " + t.device().str() : ""));
    return std::make_shared<CompletedWork>();
  }
  std::shared_ptr<std::vector<std::string>> log_;
};

struct Routed {
  std::shared_ptr<std::vector<std::string>> log = std::make_shared<std::vector<std::string>>();
  std::shared_ptr<SingleProcessCommunicator> host = std::make_shared<SingleProcessCommunicator>();
  DeviceCommunicator comm{host, std::make_shared<RecordingCollectives>("world", log)};
};

at::Tensor on_meta(int64_t n) { return at::empty({n}, at::TensorOptions().device(at::kMeta)); }

TEST(DeviceCommunicator, HostTensorsGoToTheHostGroupAndDeviceTensorsToTheDevice) {
  Routed r;
  at::Tensor host = at::ones({4});
  r.comm.all_reduce(host);
  r.comm.all_gather_into(at::empty({4}), host);
  r.comm.broadcast(host, 0);
  EXPECT_TRUE(r.log->empty());
  EXPECT_EQ(r.host->counters().count(CollectiveKind::AllReduce), 1);
  EXPECT_EQ(r.host->counters().count(CollectiveKind::AllGather), 1);

  const at::Tensor d = on_meta(4);
  r.comm.all_reduce(d);
  r.comm.all_gather_into_async(on_meta(4), d)->wait();
  r.comm.all_gather_segments_async(on_meta(4), d, {4})->wait();
  r.comm.reduce_scatter_from(on_meta(4), d);
  r.comm.all_to_all(on_meta(4), d);
  r.comm.all_to_all_v(on_meta(4), {4}, d, {4});
  r.comm.broadcast(d, 0);
  r.comm.ring_shift_async(on_meta(4), d)->wait();
  const std::vector<std::string> expected = {
      "all_reduce on world meta",          "all_gather on world meta",
      "all_gather_segments on world meta", "reduce_scatter on world meta",
      "all_to_all on world meta",          "all_to_all_v on world meta",
      "broadcast on world meta",           "ring_shift on world meta"};
  EXPECT_EQ(*r.log, expected);
  // Barriers are the host's, whatever the device.
  r.comm.barrier();
  EXPECT_EQ(r.log->size(), expected.size());
  EXPECT_EQ(r.host->counters().count(CollectiveKind::Barrier), 1);
  // Counters add both paths: 2 host all-reduces? No: 1 host + 8 device calls counted by the fake.
  EXPECT_EQ(r.comm.counters().count(CollectiveKind::AllReduce), 1 + 8);
}

TEST(DeviceCommunicator, AMixOfHostAndDeviceTensorsIsRefused) {
  Routed r;
  try {
    r.comm.all_gather_into(on_meta(4), at::ones({4}));
    FAIL() << "a mix was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("some tensors are on the CPU and some on a device"),
              std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(r.log->empty());
}

TEST(DeviceCommunicator, SplitSplitsBothWithTheSameColorKeyAndName) {
  Routed r;
  CommunicatorPtr child = r.comm.split(0, 3, "tp");
  ASSERT_EQ(r.log->size(), 1U);
  EXPECT_EQ((*r.log)[0], "split 0 3 tp like tp (ranks 0)");
  EXPECT_EQ(child->name(), "tp (ranks 0)");
  child->all_reduce(on_meta(2));
  EXPECT_EQ(r.log->back(), "all_reduce on tp (ranks 0) meta");
  auto* device_child = dynamic_cast<DeviceCommunicator*>(child.get());
  ASSERT_NE(device_child, nullptr);
  EXPECT_EQ(device_child->device_path(), "recording");
}

TEST(DeviceCommunicator, ADeviceGroupIsNotSplitDirectly) {
  auto log = std::make_shared<std::vector<std::string>>();
  RecordingCollectives device("world", log);
  EXPECT_THROW(device.split(0, 0, "tp"), Error);
}

TEST(DeviceCommunicator, WithoutDeviceCollectivesTheDevicePathIsStagedThroughTheHost) {
  DeviceCommunicator staged(std::make_shared<SingleProcessCommunicator>(), nullptr);
  EXPECT_EQ(staged.device_path(), "MPI, device tensors staged through host memory");
  // Host tensors still go straight to the host group.
  at::Tensor t = at::full({3}, 2.0);
  staged.all_reduce(t);
  EXPECT_TRUE(t.equal(at::full({3}, 2.0)));
}

}  // namespace
}  // namespace tessel::dist
