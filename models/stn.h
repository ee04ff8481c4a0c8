// models: the spatial transformer (Jaderberg et al. 2015) as one composite layer, and the `stn`
// and `stn_deep` models built on it (registered by RegisterStn, models/registry.h). The layer
// owns a localisation network whose last layer, a dense layer "<name>/theta", gives each
// example's 2x3 affine matrix; the matrix turns into a sampling grid
// (ops/cpu/spatial_transformer.h: normalised [-1, 1] coordinates, align_corners, zero padding)
// and the input image is resampled through it.
// Thread-safety: like every Layer, immutable after construction.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/layer.h"

namespace fulcrum::models {

// A spatial transformer named `name` reading `input` images and giving `output` images (same
// channels; any height and width). `localisation` is the body of the localisation network (may
// be empty): its first layer reads the input image as the layer does, each next layer the one
// before, and every name starts with "<name>/". The layer appends "<name>/theta", a linear
// dense layer to 6 outputs with zero kernel and zero bias, and reads theta = its output +
// (1, 0, 0, 0, 1, 0): the bias is the offset from the identity, so a fresh transformer starts
// as the identity, as in the paper (its kernel zero, its bias the identity).
// The layer's variables are the localisation layers' variables, in order, then theta's.
// InvalidArgument naming the layer when the shapes, channels or names do not fit.
absl::StatusOr<std::unique_ptr<Layer>> MakeSpatialTransformer(
    std::string name, ImageShape input, std::vector<std::unique_ptr<Layer>> localisation,
    ImageShape output);

}  // namespace fulcrum::models
