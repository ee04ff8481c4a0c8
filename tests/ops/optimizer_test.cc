#include "ops/optimizer.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "ops/cpu/thread_pool.h"
#include "ops/initializer.h"
#include "tests/testing/gradient_check.h"

namespace fulcrum::ops {
namespace {

using ::fulcrum::testing::Random;

// Scalar reference of every optimizer, written from TensorFlow 1.x's documented update rules.
struct ScalarState {
  double var, s0, s1;
};

void ReferenceStep(const OptimizerConfig& c, int64_t t, double g, ScalarState* s) {
  const double lr = c.learning_rate;
  switch (c.kind) {
    case OptimizerKind::kSgd:
      s->var -= lr * g;
      break;
    case OptimizerKind::kMomentum:
      s->s0 = c.momentum * s->s0 + g;
      s->var -= lr * s->s0;
      break;
    case OptimizerKind::kAdam: {
      s->s0 = c.beta1 * s->s0 + (1 - c.beta1) * g;
      s->s1 = c.beta2 * s->s1 + (1 - c.beta2) * g * g;
      const double lr_t = lr * std::sqrt(1 - std::pow(c.beta2, t)) / (1 - std::pow(c.beta1, t));
      s->var -= lr_t * s->s0 / (std::sqrt(s->s1) + c.epsilon);
      break;
    }
    case OptimizerKind::kAdagrad:
      s->s0 += g * g;
      s->var -= lr * g / std::sqrt(s->s0);
      break;
    case OptimizerKind::kRmsProp:
      // tf.train.RMSPropOptimizer (training_ops.cc ApplyRMSProp).
      s->s0 = c.rmsprop_decay * s->s0 + (1 - c.rmsprop_decay) * g * g;
      s->s1 = c.rmsprop_momentum * s->s1 + lr * g / std::sqrt(s->s0 + c.rmsprop_epsilon);
      s->var -= s->s1;
      break;
  }
}

class OptimizerTest : public ::testing::TestWithParam<const char*> {};

INSTANTIATE_TEST_SUITE_P(All, OptimizerTest,
                         ::testing::Values("sgd", "momentum", "adam", "adagrad", "rmsprop"),
                         [](const auto& info) { return std::string(info.param); });

OptimizerConfig ConfigFor(const char* name) {
  OptimizerConfig c;
  c.kind = *ParseOptimizerKind(name);
  c.learning_rate = 0.05f;
  c.rmsprop_momentum = 0.5f;  // exercise the momentum slot too
  return c;
}

std::vector<Tensor> InitialSlots(const OptimizerConfig& c, int64_t n) {
  std::vector<Tensor> slots;
  for (size_t i = 0; i < SlotNames(c.kind).size(); ++i) {
    slots.push_back(Tensor::Filled({n}, SlotInitialValue(c, static_cast<int>(i))));
  }
  return slots;
}

// `steps` applies of random gradients times grad_scale against the scalar reference fed the
// scaled gradients, on a variable of 37 elements (not a multiple of the vector width).
void ExpectMatchesReference(const char* name, int64_t steps, uint64_t seed, float grad_scale) {
  const OptimizerConfig c = ConfigFor(name);
  const int64_t n = 37;
  Tensor var = Random({n}, seed);
  std::vector<Tensor> slots = InitialSlots(c, n);
  std::vector<ScalarState> ref(n);
  for (int64_t i = 0; i < n; ++i) {
    ref[i] = {var.data()[i], SlotInitialValue(c, 0), SlotInitialValue(c, 1)};
  }
  for (int64_t t = 1; t <= steps; ++t) {
    const Tensor grad = Random({n}, 100 * seed + t);
    ASSERT_TRUE(ApplyGradient(c, t, grad, &var, slots, grad_scale).ok());
    for (int64_t i = 0; i < n; ++i) {
      ReferenceStep(c, t, static_cast<double>(grad.data()[i]) * grad_scale, &ref[i]);
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_NEAR(var.data()[i], ref[i].var, 1e-5 * (1 + std::abs(ref[i].var))) << name << i;
  }
}

TEST_P(OptimizerTest, MatchesScalarReferenceOverSteps) {
  ExpectMatchesReference(GetParam(), 25, 1, 1.0f);
}

// A sync ps passes the sum of n gradients with grad_scale 1/n: every optimizer must update
// as the reference does from the mean (3 workers: 1/3 is not exact in binary).
TEST_P(OptimizerTest, GradScaleAppliesTheScaledGradient) {
  ExpectMatchesReference(GetParam(), 10, 2, 1.0f / 3.0f);
}

// A large variable split over a pool's threads updates every element as the serial apply
// does (momentum, the studies' optimizer, bit for bit: one elementwise loop either way).
TEST_P(OptimizerTest, ApplyOverAPoolMatchesTheSerialApply) {
  const OptimizerConfig c = ConfigFor(GetParam());
  const int64_t n = kParallelApplyElements + 1237;  // parts that do not end on a vector
  ThreadPool pool(3);
  Tensor serial = Random({n}, 11);
  Tensor split = Random({n}, 11);
  std::vector<Tensor> serial_slots = InitialSlots(c, n);
  std::vector<Tensor> split_slots = InitialSlots(c, n);
  for (int64_t t = 1; t <= 3; ++t) {
    const Tensor grad = Random({n}, 300 + t);
    ASSERT_TRUE(ApplyGradient(c, t, grad, &serial, serial_slots, 0.5f).ok());
    ASSERT_TRUE(ApplyGradient(c, t, grad, &split, split_slots, 0.5f, &pool).ok());
  }
  for (int64_t i = 0; i < n; ++i) {
    if (c.kind == OptimizerKind::kMomentum || c.kind == OptimizerKind::kSgd) {
      ASSERT_EQ(split.data()[i], serial.data()[i]) << GetParam() << " " << i;
    } else {
      ASSERT_NEAR(split.data()[i], serial.data()[i], 1e-6f * (1 + std::abs(serial.data()[i])))
          << GetParam() << " " << i;
    }
  }
  // A bad operand is refused before any thread runs.
  Tensor short_grad = Random({n - 1}, 1);
  EXPECT_FALSE(ApplyGradient(c, 4, short_grad, &split, split_slots, 1.0f, &pool).ok());
}

TEST_P(OptimizerTest, DescendsAQuadratic) {
  // f(x) = 0.5 * |x - 3|^2 has gradient x - 3: every optimizer must move toward 3.
  OptimizerConfig c;
  c.kind = *ParseOptimizerKind(GetParam());
  c.learning_rate = c.kind == OptimizerKind::kAdam || c.kind == OptimizerKind::kAdagrad ? 0.3f
                    : c.kind == OptimizerKind::kRmsProp                                 ? 0.03f
                                                                                        : 0.1f;
  Tensor x = Tensor::Zeros({5});
  std::vector<Tensor> slots;
  for (size_t i = 0; i < SlotNames(c.kind).size(); ++i) {
    slots.push_back(Tensor::Filled({5}, SlotInitialValue(c, static_cast<int>(i))));
  }
  Tensor g = Tensor::Zeros({5});
  for (int t = 1; t <= 300; ++t) {
    for (int i = 0; i < 5; ++i) g.data()[i] = x.data()[i] - 3.0f;
    ASSERT_TRUE(ApplyGradient(c, t, g, &x, slots).ok());
  }
  for (float v : x.flat()) EXPECT_NEAR(v, 3.0f, 0.1f) << GetParam();
}

TEST(OptimizerErrorsTest, BadInputsAreRejected) {
  auto unknown = ParseOptimizerKind("rmsprob");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("rmsprob"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("rmsprop"), std::string::npos);

  OptimizerConfig adam;
  adam.kind = OptimizerKind::kAdam;
  Tensor var = Tensor::Zeros({4}), grad = Tensor::Zeros({4}), wrong = Tensor::Zeros({5});
  std::vector<Tensor> one_slot = {Tensor::Zeros({4})};
  EXPECT_FALSE(ApplyGradient(adam, 1, grad, &var, one_slot).ok());
  std::vector<Tensor> slots = {Tensor::Zeros({4}), Tensor::Zeros({4})};
  EXPECT_FALSE(ApplyGradient(adam, 1, wrong, &var, slots).ok());
  EXPECT_FALSE(ApplyGradient(adam, 0, grad, &var, slots).ok());
  EXPECT_TRUE(ApplyGradient(adam, 1, grad, &var, slots).ok());
}

TEST(LearningRateDecayTest, FollowsExponentialDecay) {
  // tf.train.exponential_decay(0.1, global_step, 350, 0.1, staircase): update t runs at
  // global step t - 1.
  OptimizerConfig c;
  c.learning_rate = 0.1f;
  c.lr_decay_rate = 0.1f;
  c.lr_decay_steps = 350;
  c.lr_decay_staircase = true;
  EXPECT_FLOAT_EQ(LearningRateAt(c, 1), 0.1f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 350), 0.1f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 351), 0.01f);
  EXPECT_FLOAT_EQ(LearningRateAt(c, 701), 0.001f);
  c.lr_decay_staircase = false;
  EXPECT_NEAR(LearningRateAt(c, 176), 0.1 * std::pow(0.1, 175.0 / 350.0), 1e-8);
  c.lr_decay_steps = 0;  // off
  EXPECT_FLOAT_EQ(LearningRateAt(c, 100000), 0.1f);

  // The decayed rate is the one applied: plain SGD with decay after the first period.
  c.kind = OptimizerKind::kSgd;
  c.lr_decay_steps = 2;
  c.lr_decay_staircase = true;
  Tensor var = Tensor::Zeros({1}), grad = Tensor::Filled({1}, 1.0f);
  for (int64_t t = 1; t <= 3; ++t) ASSERT_TRUE(ApplyGradient(c, t, grad, &var, {}).ok());
  EXPECT_NEAR(var.data()[0], -(0.1 + 0.1 + 0.01), 1e-7);
}

TEST(InitializerTest, DeterministicAndWithinBounds) {
  Tensor a = Tensor::Zeros({784, 10}), b = Tensor::Zeros({784, 10}), c = Tensor::Zeros({784, 10});
  ASSERT_TRUE(Initialize(Initializer::GlorotUniform(), 42, &a).ok());
  ASSERT_TRUE(Initialize(Initializer::GlorotUniform(), 42, &b).ok());
  ASSERT_TRUE(Initialize(Initializer::GlorotUniform(), 43, &c).ok());
  const float limit = std::sqrt(6.0f / (784 + 10));
  int differ = 0;
  double sum = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) {
    EXPECT_EQ(a.data()[i], b.data()[i]);
    EXPECT_LE(std::abs(a.data()[i]), limit);
    differ += a.data()[i] != c.data()[i];
    sum += a.data()[i];
  }
  EXPECT_GT(differ, a.num_elements() * 9 / 10);
  EXPECT_NEAR(sum / a.num_elements(), 0.0, limit / 10);

  Tensor n = Tensor::Zeros({1000});
  ASSERT_TRUE(Initialize(Initializer::TruncatedNormal(0.5f), 7, &n).ok());
  double sq = 0;
  for (float v : n.flat()) {
    EXPECT_LE(std::abs(v), 1.0f);
    sq += v * v;
  }
  EXPECT_NEAR(std::sqrt(sq / 1000), 0.44, 0.05);  // truncation at 2 sd shrinks sd by ~12%
  ASSERT_TRUE(Initialize(Initializer::Constant(0.25f), 1, &n).ok());
  for (float v : n.flat()) EXPECT_EQ(v, 0.25f);
}

}  // namespace
}  // namespace fulcrum::ops

namespace fulcrum::ops {
namespace {

TEST(SlotCountTest, IsTheNumberOfSlotNames) {
  for (OptimizerKind kind : {OptimizerKind::kSgd, OptimizerKind::kMomentum, OptimizerKind::kAdam,
                             OptimizerKind::kAdagrad, OptimizerKind::kRmsProp}) {
    EXPECT_EQ(SlotCount(kind), SlotNames(kind).size()) << OptimizerName(kind);
  }
}

}  // namespace
}  // namespace fulcrum::ops
