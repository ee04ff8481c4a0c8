// NVML through dlopen: a library that is not there is NotFound naming it (never a crash or a
// link error); on a machine with the NVIDIA driver, every GPU reads sane figures.
#include "profiler/nvml.h"

#include "gtest/gtest.h"

namespace fulcrum::profiler {
namespace {

TEST(NvmlTest, AMissingLibraryIsNotFoundNamingIt) {
  auto gpus = NvmlGpus::Load("libfulcrum-no-such-nvml.so.1");
  ASSERT_FALSE(gpus.ok());
  EXPECT_EQ(gpus.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(gpus.status().message().find("libfulcrum-no-such-nvml.so.1"), std::string::npos);
}

TEST(NvmlTest, ReadsEveryGpu) {
  auto gpus = NvmlGpus::Load();
  if (absl::IsNotFound(gpus.status())) {
    GTEST_SKIP() << "no NVIDIA driver here (" << gpus.status().message()
                 << "): GPU figures are tested on machines with a GPU";
  }
  ASSERT_TRUE(gpus.ok()) << gpus.status();
  auto readings = (*gpus)->Read();
  ASSERT_TRUE(readings.ok()) << readings.status();
  ASSERT_FALSE(readings->empty()) << "NVML loaded but lists no GPU";
  for (const GpuReading& g : *readings) {
    EXPECT_GE(g.utilization_percent, 0.0);
    EXPECT_LE(g.utilization_percent, 100.0);
    EXPECT_GT(g.memory_total_bytes, 0);
    EXPECT_LE(g.memory_used_bytes, g.memory_total_bytes);
  }
}

}  // namespace
}  // namespace fulcrum::profiler
