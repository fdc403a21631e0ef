// The topology half of a Keras layers-model (keras_model.h): model.json's layers, their options
// and their wiring, parsed and checked without LibTorch (the weights are bound by
// KerasModel::FromJson), so the parser builds and is fuzzed on its own (tests/fuzz).
// Accepted: the layer types and options keras_model.h lists. Errors: INVALID_ARGUMENT
// "<origin>: layer '<name>': <what>" (unknown class, unsupported option, unknown inbound layer,
// malformed JSON: never an exception).
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace fusion::keras {

enum class Op { kInput, kConv, kRelu, kConcat, kAdd, kUpsample, kMultiplyBeta, kPixelShuffle };

struct LayerSpec {
  std::string name;
  Op op = Op::kInput;
  std::vector<int> inputs;  // indices of earlier layers
  int kernel = 1, stride = 1, factor = 1;
  int64_t filters = 0;      // conv: output channels
  bool same = true, relu = false, use_bias = true;
  double halo = 0;  // receptive-field radius so far, input pixels
  int scale = 1;    // spatial scale so far
};

struct Topology {
  std::vector<LayerSpec> layers;  // in model.json order; inputs point backwards only
  int output_layer = 0;
  int input_channels = 3;
  bool tileable = true;  // every conv stride 1 and size-preserving (keras_model.h)
};

absl::StatusOr<Topology> ParseTopology(std::string_view model_json, std::string_view origin);

}  // namespace fusion::keras
