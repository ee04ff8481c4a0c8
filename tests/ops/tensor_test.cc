#include "ops/tensor.h"

#include <cstdint>

#include "gtest/gtest.h"

namespace fulcrum::ops {
namespace {

TEST(TensorTest, ZerosIsAlignedOwnedAndZero) {
  for (int64_t n : {1, 3, 17, 1000}) {
    Tensor t = Tensor::Zeros({n, 3});
    EXPECT_TRUE(t.owns_memory());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data()) % kTensorAlignment, 0u);
    EXPECT_EQ(t.num_elements(), n * 3);
    EXPECT_EQ(t.bytes(), static_cast<size_t>(n * 3) * sizeof(float));
    for (float v : t.flat()) EXPECT_EQ(v, 0.0f);
    EXPECT_EQ(t.device(), Device::kCpu);
  }
}

TEST(TensorTest, CopyAliasesCloneCopies) {
  Tensor a = Tensor::Filled({2, 2}, 1.5f);
  Tensor alias = a;
  Tensor deep = a.Clone();
  a.data()[0] = 7.0f;
  EXPECT_EQ(alias.data()[0], 7.0f);
  EXPECT_EQ(deep.data()[0], 1.5f);
}

TEST(TensorTest, ViewDoesNotOwn) {
  float buf[6] = {1, 2, 3, 4, 5, 6};
  Tensor v = Tensor::View(buf, {2, 3});
  EXPECT_FALSE(v.owns_memory());
  EXPECT_EQ(v.rows(), 2);
  EXPECT_EQ(v.cols(), 3);
  v.data()[5] = 9;
  EXPECT_EQ(buf[5], 9);
}

TEST(TensorTest, RowsSharesStorageAndOutlivesParent) {
  Tensor rows;
  {
    Tensor t = Tensor::Zeros({4, 2, 3});
    for (int64_t i = 0; i < t.num_elements(); ++i) t.data()[i] = static_cast<float>(i);
    rows = t.Rows(1, 3);
  }
  EXPECT_EQ(rows.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(rows.data()[0], 6.0f);
  EXPECT_EQ(rows.cols(), 6);
}

TEST(TensorTest, ReshapeChecksElementCount) {
  Tensor t = Tensor::Zeros({2, 6});
  EXPECT_TRUE(t.Reshaped({3, 4}).ok());
  auto bad = t.Reshaped({5, 2});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("[5, 2]"), std::string::npos);
}

TEST(TensorTest, ShapeValidationNamesTheThing) {
  auto s = ValidateShape({3, 0}, "dense/kernel");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("dense/kernel"), std::string::npos);
  EXPECT_TRUE(ValidateShape({3, 1}, "x").ok());
  EXPECT_EQ(Shape({2, 3, 4}).ToString(), "[2, 3, 4]");
}

// Shapes whose element count overflows int64 (or wraps to a small positive number) are refused
// before anything multiplies them out.
TEST(TensorTest, ShapeValidationRefusesHugeAndOverflowingShapes) {
  const int64_t big = int64_t{1} << 40;
  for (const Shape& shape : {Shape({big, big}), Shape({int64_t{1} << 32, int64_t{1} << 32, 2}),
                             Shape({3, int64_t{1} << 62, 4}), Shape({kMaxTensorElements + 1})}) {
    auto s = ValidateShape(shape, "ps:0 variable 'w'");
    ASSERT_FALSE(s.ok()) << shape.ToString();
    EXPECT_NE(s.message().find("ps:0 variable 'w'"), std::string::npos) << s;
    EXPECT_NE(s.message().find("elements"), std::string::npos) << s;
  }
  EXPECT_TRUE(ValidateShape({kMaxTensorElements}, "x").ok());
  EXPECT_TRUE(ValidateShape({1 << 17, 1 << 17}, "x").ok());
}

}  // namespace
}  // namespace fulcrum::ops
