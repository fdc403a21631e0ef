// Internal building blocks of the face-api port (TF semantics on NCHW at::Tensors).
// TF "SAME" padding is asymmetric (MODELS.md §2.3): out = ceil(in/s),
// total = max((out-1)*s + k - in, 0), before = total/2, after = the rest.
// Thread-safety: pure functions. They may throw LibTorch exceptions; the networks' high-level
// calls (Detect, Compute) catch them and return INTERNAL naming the network.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>

namespace fusion::faceapi::ops {

// 2-D convolution without padding (callers pad TF-style first): x [N,C,H,W], w OIHW (groups = C
// for depthwise), b [O] or undefined. On CPU it calls oneDNN (mkldnn_convolution) directly:
// Debian's LibTorch has no optimised BLAS, and at::conv2d picks the BLAS path for 1x1 and
// batch-1 convolutions (measured: 1x1 512->512 at 32x32, 188 ms vs 5 ms). Elsewhere, and under
// CPU autocast (bf16: the reduced-precision twin of tests/gpu/reduced_precision_test.cc), at::conv2d.
at::Tensor Conv2d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int stride = 1, int64_t groups = 1);

// Zero-pads H and W of x [N,C,H,W] as TF "SAME" does for a k x k window with stride s.
at::Tensor PadSame(const at::Tensor& x, int k, int s, double value = 0.0);

// k x k max pool with stride s and no padding, as at::max_pool2d(x, {k,k}, {s,s}, {0,0}, {1,1},
// ceil_mode) — bit-identical (a maximum is exact, NaN propagates), but as the maximum of k*k
// strided views (LibTorch 1.13's CPU max_pool2d on NCHW is a scalar kernel that also writes an
// int64 index per output: over half of TinyFaceDetector's time). ceil_mode keeps a last
// window that starts inside the input and runs past it (its outside elements are ignored: the
// input is padded with -inf there). x [N,C,H,W] floating, any device; returns a new tensor.
at::Tensor MaxPool(const at::Tensor& x, int k, int s, bool ceil_mode = false);

// conv2d with TF padding: same=true for "SAME", false for "VALID". w is OIHW.
at::Tensor Conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int stride, bool same);

// Depthwise (w [C,1,k,k]) then pointwise (pw [O,C,1,1]) convolution plus bias, TF "SAME".
at::Tensor SeparableConv(const at::Tensor& x, const at::Tensor& dw, const at::Tensor& pw,
                         const at::Tensor& b, int stride);

// x * s + b with s, b per channel [C] (broadcast over N, H, W).
at::Tensor ChannelAffine(const at::Tensor& x, const at::Tensor& s, const at::Tensor& b);

// Tiled execution of a network's high-resolution prefix (patch-based inference, as in MCUNetV2,
// Lin et al. 2021): the layers near the input hold the largest activations, so running them on
// windows and stitching their outputs bounds the working set while the low-resolution rest runs
// whole. `prefix` must be fully convolutional with total stride `stride` and map an input of
// side n (a multiple of stride) to side n / stride. x [N,C,H,W], H and W multiples of stride.
// Cores of tile_px x tile_px (rounded down to a multiple of stride, at least stride) are grown by
// halo_px on each side (clipped to the image) and only the core's outputs are kept. With windows
// starting on the stride grid and halo_px >= the prefix's receptive-field radius, the result
// equals prefix(x) up to float summation order: a window's zero padding only touches outputs in
// its halo, and a window at an image edge pads exactly as the whole input does.
// Returns [N,C',H/stride,W/stride] on x's device. Throws c10::Error on a shape mismatch.
using Prefix = std::function<at::Tensor(const at::Tensor&)>;
at::Tensor TiledPrefix(const at::Tensor& x, const Prefix& prefix, int stride, int halo_px, int tile_px);

}  // namespace fusion::faceapi::ops
