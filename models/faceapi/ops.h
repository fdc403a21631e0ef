// Internal building blocks of the face-api port (TF semantics on NCHW at::Tensors).
// TF "SAME" padding is asymmetric (MODELS.md §2.3): out = ceil(in/s),
// total = max((out-1)*s + k - in, 0), before = total/2, after = the rest.
#pragma once

#include <ATen/core/Tensor.h>

namespace fusion::faceapi::ops {

// Zero-pads H and W of x [N,C,H,W] as TF "SAME" does for a k x k window with stride s.
at::Tensor PadSame(const at::Tensor& x, int k, int s, double value = 0.0);

// conv2d with TF padding: same=true for "SAME", false for "VALID". w is OIHW.
at::Tensor Conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int stride, bool same);

// Depthwise (w [C,1,k,k]) then pointwise (pw [O,C,1,1]) convolution plus bias, TF "SAME".
at::Tensor SeparableConv(const at::Tensor& x, const at::Tensor& dw, const at::Tensor& pw,
                         const at::Tensor& b, int stride);

// x * s + b with s, b per channel [C] (broadcast over N, H, W).
at::Tensor ChannelAffine(const at::Tensor& x, const at::Tensor& s, const at::Tensor& b);

}  // namespace fusion::faceapi::ops
