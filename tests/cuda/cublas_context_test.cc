// Conformance of the cuBLAS MatMul against the CPU MatMul (ops/cpu), the reference backend.
#include "ops/cuda/cublas_context.h"

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "ops/cpu/kernels.h"
#include "ops/cuda/device_memory.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/matmul_cases.h"

namespace fulcrum::ops::cuda {
namespace {

// A device copy of a CPU tensor, or a failed assertion.
Tensor ToDevice(const Tensor& host) {
  absl::StatusOr<Tensor> device = AllocateDevice(host.shape());
  EXPECT_TRUE(device.ok()) << device.status();
  if (!device.ok()) return Tensor();
  const absl::Status s = CopyToDevice(host, &*device);
  EXPECT_TRUE(s.ok()) << s;
  return *device;
}

Tensor ToHost(const Tensor& device) {
  Tensor host = Tensor::Zeros(device.shape());
  const absl::Status s = CopyToHost(device, &host);
  EXPECT_TRUE(s.ok()) << s;
  return host;
}

class CublasTest : public GpuTest {
 protected:
  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    absl::StatusOr<std::unique_ptr<CublasContext>> context = CublasContext::Create();
    ASSERT_TRUE(context.ok()) << context.status();
    context_ = std::move(*context);
  }

  std::unique_ptr<CublasContext> context_;
};

class CublasMatMulTest : public CublasTest, public ::testing::WithParamInterface<MatMulCase> {};

TEST_P(CublasMatMulTest, MatchesCpuMatMul) {
  const auto& [d, trans_a, trans_b] = GetParam();
  const Tensor a = RandomTensor(ShapeOfA(d, trans_a), 11);
  const Tensor b = RandomTensor(ShapeOfB(d, trans_b), 12);
  const Tensor out0 = RandomTensor(Shape{d.m, d.n}, 13);
  const Tensor a_gpu = ToDevice(a);
  const Tensor b_gpu = ToDevice(b);
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulate" : "overwrite");
    Tensor want = out0.Clone();
    ASSERT_TRUE(MatMul(a, trans_a, b, trans_b, &want, accumulate).ok());
    Tensor out_gpu = ToDevice(out0);
    const absl::Status s = context_->MatMul(a_gpu, trans_a, b_gpu, trans_b, &out_gpu, accumulate);
    ASSERT_TRUE(s.ok()) << s;
    ExpectAllClose(ToHost(out_gpu), want, 1e-4f);
  }
}

INSTANTIATE_TEST_SUITE_P(AllShapes, CublasMatMulTest, AllMatMulCases(), MatMulCaseName);

TEST_F(CublasTest, ShapeMismatchIsInvalidArgumentAndLeavesOutAlone) {
  const Tensor a = ToDevice(Tensor::Filled(Shape{3, 4}, 1.0f));
  const Tensor b = ToDevice(Tensor::Filled(Shape{5, 2}, 1.0f));
  Tensor out = ToDevice(Tensor::Filled(Shape{3, 2}, 9.0f));
  const absl::Status s = context_->MatMul(a, false, b, false, &out);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("inner dimensions differ"), std::string::npos) << s;
  // Named: a range-for over ToHost(out).flat() would read the temporary's freed memory.
  const Tensor out_host = ToHost(out);
  for (float v : out_host.flat()) EXPECT_EQ(v, 9.0f);
}

TEST_F(CublasTest, CpuTensorsAreInvalidArgument) {
  const Tensor a_cpu = Tensor::Filled(Shape{2, 2}, 1.0f);
  const Tensor b = ToDevice(a_cpu);
  Tensor out = ToDevice(a_cpu);
  absl::Status s = context_->MatMul(a_cpu, false, b, false, &out);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("a is on cpu"), std::string::npos) << s;
  Tensor out_cpu = Tensor::Zeros(Shape{2, 2});
  s = context_->MatMul(b, false, b, false, &out_cpu);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
}

}  // namespace
}  // namespace fulcrum::ops::cuda
