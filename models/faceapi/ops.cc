#include "models/faceapi/ops.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace fusion::faceapi::ops {
namespace {

std::pair<int64_t, int64_t> SamePad(int64_t in, int k, int s) {
  const int64_t out = (in + s - 1) / s;
  const int64_t total = std::max<int64_t>((out - 1) * s + k - in, 0);
  return {total / 2, total - total / 2};
}

}  // namespace

at::Tensor Conv2d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int stride, int64_t groups) {
  const c10::optional<at::Tensor> bias = b.defined() ? c10::optional<at::Tensor>(b) : c10::nullopt;
  if (x.is_cpu() && x.scalar_type() == at::kFloat && at::hasMKLDNN()) {
    return at::mkldnn_convolution(x.contiguous(), w, bias, {0, 0}, {stride, stride}, {1, 1}, groups);
  }
  return at::conv2d(x, w, bias, at::IntArrayRef{stride, stride}, at::IntArrayRef{0, 0}, at::IntArrayRef{1, 1}, groups);
}

at::Tensor PadSame(const at::Tensor& x, int k, int s, double value) {
  auto [top, bottom] = SamePad(x.size(2), k, s);
  auto [left, right] = SamePad(x.size(3), k, s);
  if (top == 0 && bottom == 0 && left == 0 && right == 0) return x;
  return at::constant_pad_nd(x, {left, right, top, bottom}, value);
}

at::Tensor Conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int stride, bool same) {
  const int k = static_cast<int>(w.size(2));
  return Conv2d(same ? PadSame(x, k, stride) : x, w, b, stride);
}

at::Tensor SeparableConv(const at::Tensor& x, const at::Tensor& dw, const at::Tensor& pw,
                         const at::Tensor& b, int stride) {
  const int k = static_cast<int>(dw.size(2));
  at::Tensor y = Conv2d(PadSame(x, k, stride), dw, at::Tensor(), stride, x.size(1));
  return Conv2d(y, pw, b);
}

at::Tensor ChannelAffine(const at::Tensor& x, const at::Tensor& s, const at::Tensor& b) {
  return at::addcmul(b.view({1, -1, 1, 1}), x, s.view({1, -1, 1, 1}));
}

}  // namespace fusion::faceapi::ops
