// Fuzz target: the Keras layers-model topology parser (models/keras/keras_topology.h): the
// model.json that KerasModel::FromJson binds weights to and Forward runs. docs/FUZZING.md.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

#include "fuzz_check.h"
#include "models/keras/keras_topology.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto t = fusion::keras::ParseTopology(text, "fuzz model.json");
  if (!t.ok()) {
    FUZZ_CHECK(t.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  // What FromJson and Forward rely on: a defined output, inputs that point backwards, and
  // sizes that divide and multiply safely (SamePad divides by the stride, PixelShuffle by
  // factor^2, halo_px() is ceil(halo) as an int).
  FUZZ_CHECK(!t->layers.empty());
  FUZZ_CHECK(t->output_layer >= 0 && static_cast<size_t>(t->output_layer) < t->layers.size());
  FUZZ_CHECK(t->input_channels >= 1);
  for (size_t i = 0; i < t->layers.size(); ++i) {
    const fusion::keras::LayerSpec& l = t->layers[i];
    for (int k : l.inputs) FUZZ_CHECK(k >= 0 && static_cast<size_t>(k) < i);
    FUZZ_CHECK(l.kernel >= 1 && l.stride >= 1 && l.factor >= 1 && l.scale >= 1);
    if (l.op == fusion::keras::Op::kConv) FUZZ_CHECK(l.filters >= 1);
    FUZZ_CHECK(std::isfinite(l.halo) && l.halo >= 0 && l.halo < std::numeric_limits<int>::max());
  }
  return 0;
}
