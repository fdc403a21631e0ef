// SSD MobileNetV1's prior (anchor) boxes, regenerated: the rule behind the 5118 boxes the weights
// store (`Output/extra_dim`), for inputs larger than 512 (so that a larger input can run as one
// forward instead of overlapping 512-px tiles; not wired into Forward yet).
//
// The stored priors are TensorFlow Object Detection's ssd_anchor_generator as face-api's model was
// exported: 6 feature maps at strides 16, 32, 64, 128, 256, 512 input px (32, 16, 8, 4, 2, 1 cells
// at 512); scales s_k = 0.2 + 0.15 k (k = 0..5) of the 512 input, s_6 = 1; map 0 has 3 anchors
// (scale 0.1 aspect 1, s_0 aspect 2, s_0 aspect 0.5), maps 1-5 have 6 (s_k at aspect 1, then
// sqrt(s_k s_k+1) at aspect 1, then s_k at aspects 2, 0.5, 3, 0.3333: 0.3333 and not 1/3, as the
// stored boxes show); an anchor of scale s and aspect a is s*sqrt(a) wide and s/sqrt(a) tall;
// centres at (i + 0.5, j + 0.5) cells; not clipped. Order: map, cell row, cell column, anchor.
// Regenerated for 512 x 512 they equal the stored boxes within 1.2e-7 (one float32 ulp near 1;
// ssd_priors_test.cc).
// In input pixels an anchor is the same at every input size (its side s * 512 px, its centre
// (i + 0.5) * stride px), so for an input whose sides are multiples of 512 (every map's cell count
// exact: side / stride) each cell's priors are those of the 512-px tiling at the same pixels.
// Other sizes are refused: the deepest maps would round their cell counts up (SAME padding) and
// their centres were not checked against the network's geometry.
// Thread-safety: a pure function.
#pragma once

#include <vector>

#include "absl/status/statusor.h"

namespace fusion::faceapi {

// Priors for an input of height x width px (both positive multiples of 512): 4 floats per box,
// (ymin, xmin, ymax, xmax) relative to the input (the layout of `Output/extra_dim` [1,N,4]);
// N = 1 + 2 + 6 * 5 ... = 5118 at 512 x 512, about (h / 512) * (w / 512) times that above.
// INVALID_ARGUMENT for another size.
absl::StatusOr<std::vector<float>> SsdPriorBoxes(int height, int width);

}  // namespace fusion::faceapi
