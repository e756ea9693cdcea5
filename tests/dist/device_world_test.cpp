// The device path's choice (dist/device_world.h): NCCL where the loaded NCCL
// can serve the ranks, else MPI over host copies, with the reason; the
// environment parsed with clear errors; a rank's place on its node from the
// launcher's variables.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "core/error.h"
#include "dist/device_world.h"
#include "dist/single_process_communicator.h"

namespace tessel::dist {
namespace {

NcclInfo nccl(int code) {
  NcclInfo n;
  n.available = true;
  n.version_code = code;
  n.version = std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
              std::to_string(code % 100);
  return n;
}

NcclInfo absent() {
  NcclInfo n;
  n.reason = "built without NCCL";
  return n;
}

TEST(DeviceComm, OneRankPerGpuTakesNccl) {
  const auto c = choose_device_comm(DeviceCommRequest::Auto, nccl(22809), 1, false);
  EXPECT_TRUE(c.nccl);
  EXPECT_EQ(c.reason, "NCCL 2.28.9");
}

TEST(DeviceComm, SharedGpusNeedNcclTwoThirtyItsSwitchAndAtMostTwoRanks) {
  // 2.28: refuses several ranks per GPU -> MPI, saying why.
  auto c = choose_device_comm(DeviceCommRequest::Auto, nccl(22809), 4, true);
  EXPECT_FALSE(c.nccl);
  EXPECT_NE(c.reason.find("4 ranks share a GPU and NCCL 2.28.9 does not allow that"),
            std::string::npos)
      << c.reason;
  EXPECT_NE(c.reason.find("staged in host memory"), std::string::npos) << c.reason;
  // 2.30 without the switch, or with more than two ranks: MPI.
  EXPECT_FALSE(choose_device_comm(DeviceCommRequest::Auto, nccl(23007), 2, false).nccl);
  EXPECT_FALSE(choose_device_comm(DeviceCommRequest::Auto, nccl(23007), 3, true).nccl);
  // 2.30 with the switch and two ranks: NCCL.
  c = choose_device_comm(DeviceCommRequest::Auto, nccl(23007), 2, true);
  EXPECT_TRUE(c.nccl);
  EXPECT_NE(c.reason.find("NCCL_MULTI_RANK_GPU_ENABLE=1"), std::string::npos) << c.reason;
}

TEST(DeviceComm, AskingForNcclWhereItCannotServeIsAnError) {
  try {
    choose_device_comm(DeviceCommRequest::Nccl, nccl(22809), 2, false);
    FAIL() << "accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("TESSEL_COMM=nccl, but 2 ranks share a GPU"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(choose_device_comm(DeviceCommRequest::Nccl, absent(), 1, false), UsageError);
  // Without NCCL, auto falls back and says why.
  const auto c = choose_device_comm(DeviceCommRequest::Auto, absent(), 1, false);
  EXPECT_FALSE(c.nccl);
  EXPECT_NE(c.reason.find("built without NCCL"), std::string::npos) << c.reason;
}

TEST(DeviceComm, MpiIsTakenWhenAskedFor) {
  EXPECT_FALSE(choose_device_comm(DeviceCommRequest::Mpi, nccl(23007), 1, true).nccl);
}

TEST(DeviceComm, ParsesTheRequest) {
  EXPECT_EQ(parse_device_comm_request(""), DeviceCommRequest::Auto);
  EXPECT_EQ(parse_device_comm_request("nccl"), DeviceCommRequest::Nccl);
  EXPECT_EQ(parse_device_comm_request("mpi"), DeviceCommRequest::Mpi);
  EXPECT_THROW(parse_device_comm_request("gloo"), UsageError);
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(DeviceComm, TheEnvironmentIsCheckedWithClearErrors) {
  {
    ScopedEnv d("TESSEL_DEVICE", "tpu");
    EXPECT_THROW(device_environment(), UsageError);
  }
  {
    ScopedEnv s("TESSEL_ALLOW_SHARED_GPU", "yes");
    EXPECT_THROW(device_environment(), UsageError);
  }
  ScopedEnv d("TESSEL_DEVICE", "cpu"), c("TESSEL_COMM", "mpi"), s("TESSEL_ALLOW_SHARED_GPU", "1");
  const DeviceEnvironment e = device_environment();
  EXPECT_EQ(e.device, device::DeviceRequest::Cpu);
  EXPECT_EQ(e.comm, DeviceCommRequest::Mpi);
  EXPECT_TRUE(e.allow_shared);
}

TEST(DeviceComm, ThePlacementComesFromTheLauncher) {
  SingleProcessCommunicator one;
  {
    ScopedEnv r("OMPI_COMM_WORLD_LOCAL_RANK", "2"), n("OMPI_COMM_WORLD_LOCAL_SIZE", "4");
    const auto p = node_placement(one);
    EXPECT_EQ(p.local_rank, 2);
    EXPECT_EQ(p.local_size, 4);
  }
  {
    ScopedEnv r("OMPI_COMM_WORLD_LOCAL_RANK", "x"), n("OMPI_COMM_WORLD_LOCAL_SIZE", "4"),
        lr("LOCAL_RANK", "1"), ls("LOCAL_WORLD_SIZE", "2");
    const auto p = node_placement(one);
    EXPECT_EQ(p.local_rank, 1);
    EXPECT_EQ(p.local_size, 2);
  }
}

TEST(DeviceComm, OnTheCpuTheWorldIsTheHostWorld) {
  ScopedEnv d("TESSEL_DEVICE", "cpu");
  auto host = std::make_shared<SingleProcessCommunicator>();
  const DeviceWorld w = setup_device_world(host);
  EXPECT_TRUE(w.device.is_cpu());
  EXPECT_EQ(w.world.get(), host.get());
  ASSERT_FALSE(w.log_lines.empty());
  EXPECT_NE(w.log_lines[0].find("TESSEL_DEVICE=cpu"), std::string::npos) << w.log_lines[0];
}

}  // namespace
}  // namespace tessel::dist
