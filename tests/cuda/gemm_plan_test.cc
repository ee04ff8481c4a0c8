// Checks the row-major -> column-major GEMM mapping on the CPU, so the argument plumbing of
// cublasSgemm is verified on machines without a GPU: a reference sgemm written from the
// BLAS definition, run on the planned arguments, must match the CPU MatMul.
#include "ops/cuda/gemm_plan.h"

#include <array>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "ops/cpu/kernels.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/matmul_cases.h"

namespace fulcrum::ops::cuda {
namespace {

// C = op(X) op(Y) + beta C on column-major buffers, as BLAS sgemm defines it
// (M(r, c) of a column-major matrix with leading dimension ld is M[r + c * ld]).
void ReferenceSgemm(const ColumnMajorGemm& g, const float* x, const float* y, float beta,
                    float* c) {
  for (int j = 0; j < g.n; ++j) {
    for (int i = 0; i < g.m; ++i) {
      double sum = 0;
      for (int p = 0; p < g.k; ++p) {
        const float xv = g.trans_x ? x[p + i * g.ldx] : x[i + p * g.ldx];  // op(X)(i, p)
        const float yv = g.trans_y ? y[j + p * g.ldy] : y[p + j * g.ldy];  // op(Y)(p, j)
        sum += static_cast<double>(xv) * yv;
      }
      float& cv = c[i + j * g.ldc];
      cv = static_cast<float>(sum + static_cast<double>(beta) * cv);
    }
  }
}

class GemmPlanTest : public ::testing::TestWithParam<MatMulCase> {};

TEST_P(GemmPlanTest, ReferenceGemmOnPlanMatchesCpuMatMul) {
  const auto& [d, trans_a, trans_b] = GetParam();
  const Tensor a = RandomTensor(ShapeOfA(d, trans_a), 1);
  const Tensor b = RandomTensor(ShapeOfB(d, trans_b), 2);
  const Tensor out0 = RandomTensor(Shape{d.m, d.n}, 3);
  for (bool accumulate : {false, true}) {
    SCOPED_TRACE(accumulate ? "accumulate" : "overwrite");
    Tensor want = out0.Clone();
    ASSERT_TRUE(MatMul(a, trans_a, b, trans_b, &want, accumulate).ok());

    Tensor got = out0.Clone();
    absl::StatusOr<ColumnMajorGemm> plan = PlanRowMajorMatMul(a, trans_a, b, trans_b, got);
    ASSERT_TRUE(plan.ok()) << plan.status();
    ReferenceSgemm(*plan, b.data(), a.data(), accumulate ? 1.0f : 0.0f, got.data());
    ExpectAllClose(got, want, 1e-4f);
  }
}

INSTANTIATE_TEST_SUITE_P(AllShapes, GemmPlanTest, AllMatMulCases(), MatMulCaseName);

TEST(GemmPlan, HigherRankTensorsAreSeenAsRowsByCols) {
  // a [2, 3, 4] is the matrix [2, 12]; b [12, 5]; out [2, 5].
  const Tensor a = Tensor::Zeros(Shape{2, 3, 4});
  const Tensor b = Tensor::Zeros(Shape{12, 5});
  const Tensor out = Tensor::Zeros(Shape{2, 5});
  absl::StatusOr<ColumnMajorGemm> plan = PlanRowMajorMatMul(a, false, b, false, out);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->m, 5);
  EXPECT_EQ(plan->n, 2);
  EXPECT_EQ(plan->k, 12);
  EXPECT_EQ(plan->ldy, 12);
}

TEST(GemmPlan, InnerDimensionMismatchIsInvalidArgument) {
  const Tensor a = Tensor::Zeros(Shape{3, 4});
  const Tensor b = Tensor::Zeros(Shape{5, 2});
  const Tensor out = Tensor::Zeros(Shape{3, 2});
  const absl::Status s = PlanRowMajorMatMul(a, false, b, false, out).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("inner dimensions differ"), std::string::npos) << s;
  // Read transposed, b is [2, 5]: its k = 2 still differs from 4.
  EXPECT_TRUE(absl::IsInvalidArgument(PlanRowMajorMatMul(a, false, b, true, out).status()));
}

TEST(GemmPlan, WrongOutputShapeIsInvalidArgument) {
  const Tensor a = Tensor::Zeros(Shape{3, 4});
  const Tensor b = Tensor::Zeros(Shape{4, 2});
  const Tensor out = Tensor::Zeros(Shape{2, 3});
  const absl::Status s = PlanRowMajorMatMul(a, false, b, false, out).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("expected [3, 2]"), std::string::npos) << s;
}

TEST(GemmPlan, CpuOperandsAreRejectedForCuda) {
  std::array<float, 4> fake{};  // never dereferenced: only the device tag is checked
  const Tensor on_gpu = Tensor::View(fake.data(), Shape{2, 2}, Device::kCuda);
  Tensor on_cpu = Tensor::Zeros(Shape{2, 2});
  Tensor out_gpu = on_gpu;
  absl::Status s = CheckMatMulDevices(on_cpu, on_gpu, &out_gpu, Device::kCuda);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("a is on cpu"), std::string::npos) << s;
  s = CheckMatMulDevices(on_gpu, on_gpu, &on_cpu, Device::kCuda);
  EXPECT_NE(s.message().find("out is on cpu"), std::string::npos) << s;
  EXPECT_TRUE(absl::IsInvalidArgument(CheckMatMulDevices(on_gpu, on_gpu, nullptr, Device::kCuda)));
  EXPECT_TRUE(CheckMatMulDevices(on_gpu, on_gpu, &out_gpu, Device::kCuda).ok());
}

}  // namespace
}  // namespace fulcrum::ops::cuda
