#include "runtime/frames/proto_convert.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace fulcrum::runtime {

pb::InitializerDef InitializerToProto(const ops::Initializer& init) {
  pb::InitializerDef def;
  using Kind = ops::Initializer::Kind;
  switch (init.kind) {
    case Kind::kZeros:
      def.set_kind("zeros");
      break;
    case Kind::kConstant:
      def.set_kind("constant");
      break;
    case Kind::kGlorotUniform:
      def.set_kind("glorot_uniform");
      break;
    case Kind::kUniform:
      def.set_kind("uniform");
      break;
    case Kind::kNormal:
      def.set_kind("truncated_normal");
      break;
  }
  def.set_value(init.value);
  return def;
}

absl::StatusOr<ops::Initializer> InitializerFromProto(const pb::InitializerDef& def) {
  using Kind = ops::Initializer::Kind;
  ops::Initializer init;
  init.value = def.value();
  const std::string& k = def.kind();
  if (k == "zeros") {
    init.kind = Kind::kZeros;
  } else if (k == "constant") {
    init.kind = Kind::kConstant;
  } else if (k == "glorot_uniform") {
    init.kind = Kind::kGlorotUniform;
  } else if (k == "uniform") {
    init.kind = Kind::kUniform;
  } else if (k == "truncated_normal") {
    init.kind = Kind::kNormal;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown initializer '", k,
                     "': expected zeros, constant, glorot_uniform, uniform or truncated_normal"));
  }
  return init;
}

pb::OptimizerDef OptimizerToProto(const ops::OptimizerConfig& config) {
  pb::OptimizerDef def;
  def.set_kind(ops::OptimizerName(config.kind));
  def.set_learning_rate(config.learning_rate);
  def.set_momentum(config.momentum);
  def.set_beta1(config.beta1);
  def.set_beta2(config.beta2);
  def.set_epsilon(config.epsilon);
  def.set_initial_accumulator(config.initial_accumulator);
  def.set_rmsprop_decay(config.rmsprop_decay);
  def.set_rmsprop_momentum(config.rmsprop_momentum);
  def.set_rmsprop_epsilon(config.rmsprop_epsilon);
  def.set_lr_decay_rate(config.lr_decay_rate);
  def.set_lr_decay_steps(config.lr_decay_steps);
  def.set_lr_decay_staircase(config.lr_decay_staircase);
  return def;
}

absl::StatusOr<ops::OptimizerConfig> OptimizerFromProto(const pb::OptimizerDef& def) {
  ops::OptimizerConfig c;
  FULCRUM_ASSIGN_OR_RETURN(c.kind, ops::ParseOptimizerKind(def.kind()));
  c.learning_rate = def.learning_rate();
  c.momentum = def.momentum();
  c.beta1 = def.beta1();
  c.beta2 = def.beta2();
  c.epsilon = def.epsilon();
  c.initial_accumulator = def.initial_accumulator();
  c.rmsprop_decay = def.rmsprop_decay();
  c.rmsprop_momentum = def.rmsprop_momentum();
  c.rmsprop_epsilon = def.rmsprop_epsilon();
  c.lr_decay_rate = def.lr_decay_rate() == 0.0f ? 1.0f : def.lr_decay_rate();
  c.lr_decay_steps = def.lr_decay_steps();
  c.lr_decay_staircase = def.lr_decay_staircase();
  const bool finite = std::isfinite(c.learning_rate) && std::isfinite(c.rmsprop_decay) &&
                      std::isfinite(c.rmsprop_momentum) && std::isfinite(c.rmsprop_epsilon) &&
                      std::isfinite(c.lr_decay_rate);
  const bool rmsprop_ok = c.kind != ops::OptimizerKind::kRmsProp ||
                          (c.rmsprop_decay >= 0 && c.rmsprop_decay < 1 &&
                           c.rmsprop_momentum >= 0 && c.rmsprop_momentum < 1 &&
                           c.rmsprop_epsilon > 0);
  if (!finite || !rmsprop_ok || c.lr_decay_rate <= 0 || c.lr_decay_rate > 1 ||
      c.lr_decay_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("optimizer ", def.kind(), ": a learning rate, RMSProp or decay setting is "
                     "out of range (learning_rate ", c.learning_rate, ", rmsprop ",
                     c.rmsprop_decay, "/", c.rmsprop_momentum, "/", c.rmsprop_epsilon,
                     ", decay ", c.lr_decay_rate, " every ", c.lr_decay_steps, ")"));
  }
  return c;
}

}  // namespace fulcrum::runtime
