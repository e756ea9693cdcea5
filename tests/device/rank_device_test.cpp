// Which device each rank takes (device/rank_device.h): decided from the
// node placement and the devices seen, with no GPU needed to test it.
#include <gtest/gtest.h>

#include "core/error.h"
#include "device/rank_device.h"

namespace tessel::device {
namespace {

RankDevice choose(DeviceRequest r, int local_rank, int local_size, int devices,
                  bool shared = false) {
  return choose_rank_device(r, NodePlacement{local_rank, local_size}, devices, shared,
                            "no driver here");
}

TEST(RankDevice, ParsesTheRequest) {
  EXPECT_EQ(parse_device_request(""), DeviceRequest::Auto);
  EXPECT_EQ(parse_device_request("auto"), DeviceRequest::Auto);
  EXPECT_EQ(parse_device_request("cpu"), DeviceRequest::Cpu);
  EXPECT_EQ(parse_device_request("cuda"), DeviceRequest::Cuda);
  try {
    parse_device_request("gpu");
    FAIL() << "gpu accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("TESSEL_DEVICE='gpu'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
}

TEST(RankDevice, EachLocalRankTakesItsOwnDevice) {
  for (int r = 0; r < 4; ++r) {
    const RankDevice d = choose(DeviceRequest::Auto, r, 4, 8);
    EXPECT_EQ(d.device, c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(r)));
    EXPECT_NE(d.reason.find("local rank " + std::to_string(r) + " of 4"), std::string::npos)
        << d.reason;
  }
  EXPECT_EQ(choose(DeviceRequest::Cuda, 0, 1, 1).device, c10::Device(c10::kCUDA, 0));
}

TEST(RankDevice, WithoutDevicesAutoIsTheCpuAndCudaAnError) {
  const RankDevice d = choose(DeviceRequest::Auto, 1, 2, 0);
  EXPECT_TRUE(d.device.is_cpu());
  EXPECT_NE(d.reason.find("no driver here"), std::string::npos) << d.reason;
  try {
    choose(DeviceRequest::Cuda, 0, 1, 0);
    FAIL() << "cuda without devices accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("no driver here"), std::string::npos) << e.what();
  }
}

TEST(RankDevice, CpuWinsOverPresentDevices) {
  EXPECT_TRUE(choose(DeviceRequest::Cpu, 0, 2, 8).device.is_cpu());
}

TEST(RankDevice, MoreRanksThanDevicesIsRefusedUnlessShared) {
  try {
    choose(DeviceRequest::Auto, 2, 3, 2);
    FAIL() << "3 ranks on 2 devices accepted";
  } catch (const UsageError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("3 ranks on this node but only 2 CUDA devices"), std::string::npos) << m;
    EXPECT_NE(m.find("TESSEL_ALLOW_SHARED_GPU=1"), std::string::npos) << m;
  }
  // Shared: round robin over the devices.
  EXPECT_EQ(choose(DeviceRequest::Auto, 0, 4, 1, true).device, c10::Device(c10::kCUDA, 0));
  EXPECT_EQ(choose(DeviceRequest::Auto, 3, 4, 1, true).device, c10::Device(c10::kCUDA, 0));
  EXPECT_EQ(choose(DeviceRequest::Auto, 3, 4, 2, true).device, c10::Device(c10::kCUDA, 1));
  EXPECT_NE(choose(DeviceRequest::Auto, 2, 3, 2, true).reason.find("TESSEL_ALLOW_SHARED_GPU=1"),
            std::string::npos);
}

TEST(RankDevice, APlacementOutsideTheNodeIsABug) {
  EXPECT_THROW(choose(DeviceRequest::Auto, 2, 2, 4), Error);
  EXPECT_THROW(choose(DeviceRequest::Auto, 0, 0, 4), Error);
}

}  // namespace
}  // namespace tessel::device
