#include "ops/cuda/device_memory.h"

#include <array>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "tests/cuda/cuda_test_util.h"

namespace fulcrum::ops::cuda {
namespace {

// Runs everywhere: either devices are found or the status says why not, naming the error.
TEST(DeviceCount, ReportsDevicesOrWhyThereAreNone) {
  absl::StatusOr<int> count = DeviceCount();
  if (count.ok()) {
    EXPECT_GE(*count, 1);
    return;
  }
  EXPECT_TRUE(IsNoDeviceError(count.status())) << count.status();
  EXPECT_NE(count.status().message().find("cudaGetDeviceCount returned cudaError"),
            std::string::npos)
      << count.status();
}

TEST(AllocateDevice, RejectsNonPositiveDimensionBeforeTouchingCuda) {
  const absl::Status s = AllocateDevice(Shape{0, 3}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
}

TEST(Copy, RejectsWrongDevicesAndShapesBeforeTouchingCuda) {
  std::array<float, 6> fake{};  // never dereferenced: every call below fails its checks
  Tensor gpu = Tensor::View(fake.data(), Shape{2, 3}, Device::kCuda);
  Tensor cpu = Tensor::Zeros(Shape{2, 3});
  Tensor cpu_other_shape = Tensor::Zeros(Shape{3, 2});

  absl::Status s = CopyToDevice(cpu, &cpu_other_shape);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("device is on cpu"), std::string::npos) << s;
  s = CopyToDevice(gpu, &gpu);
  EXPECT_NE(s.message().find("host is on cuda"), std::string::npos) << s;
  s = CopyToHost(gpu, &cpu_other_shape);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("shapes differ"), std::string::npos) << s;
  EXPECT_TRUE(absl::IsInvalidArgument(CopyToHost(cpu, &cpu)));
  EXPECT_TRUE(absl::IsInvalidArgument(CopyToHost(gpu, nullptr)));
}

class DeviceMemoryTest : public GpuTest {};

TEST_F(DeviceMemoryTest, AllocationIsZeroedCudaStorage) {
  absl::StatusOr<Tensor> t = AllocateDevice(Shape{3, 5});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->device(), Device::kCuda);
  EXPECT_TRUE(t->owns_memory());
  Tensor host = Tensor::Filled(Shape{3, 5}, 7.0f);
  ASSERT_TRUE(CopyToHost(*t, &host).ok());
  for (float v : host.flat()) EXPECT_EQ(v, 0.0f);
}

TEST_F(DeviceMemoryTest, RoundTripIsExact) {
  for (const Shape& shape : {Shape{1}, Shape{7, 13}, Shape{3, 5, 7}, Shape{1000003}}) {
    SCOPED_TRACE(shape.ToString());
    const Tensor host = RandomTensor(shape, 42);
    absl::StatusOr<Tensor> device = AllocateDevice(shape);
    ASSERT_TRUE(device.ok()) << device.status();
    ASSERT_TRUE(CopyToDevice(host, &*device).ok());
    Tensor back = Tensor::Zeros(shape);
    ASSERT_TRUE(CopyToHost(*device, &back).ok());
    for (int64_t i = 0; i < host.num_elements(); ++i) {
      ASSERT_EQ(back.flat()[static_cast<size_t>(i)], host.flat()[static_cast<size_t>(i)]) << i;
    }
  }
}

TEST_F(DeviceMemoryTest, CopyShapeMismatchIsInvalidArgument) {
  absl::StatusOr<Tensor> device = AllocateDevice(Shape{4, 2});
  ASSERT_TRUE(device.ok()) << device.status();
  Tensor host = Tensor::Zeros(Shape{2, 4});
  absl::Status s = CopyToDevice(host, &*device);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("shapes differ"), std::string::npos) << s;
  s = CopyToHost(*device, &host);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
}

}  // namespace
}  // namespace fulcrum::ops::cuda
