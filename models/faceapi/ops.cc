#include "models/faceapi/ops.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

#include "models/common/torch_autocast.h"

namespace fusion::faceapi::ops {
namespace {

std::pair<int64_t, int64_t> SamePad(int64_t in, int k, int s) {
  const int64_t out = (in + s - 1) / s;
  const int64_t total = std::max<int64_t>((out - 1) * s + k - in, 0);
  return {total / 2, total - total / 2};
}

using torch_compat::CpuAutocast;  // LibTorch 1.13 and 2.x name it differently

}  // namespace

at::Tensor Conv2d(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, int stride, int64_t groups) {
  const c10::optional<at::Tensor> bias = b.defined() ? c10::optional<at::Tensor>(b) : c10::nullopt;
  // oneDNN's convolution directly for a float32 CPU input - but not under CPU autocast
  // (bf16), where at::conv2d is the op autocast runs at the reduced precision.
  if (x.is_cpu() && x.scalar_type() == at::kFloat && at::hasMKLDNN() && !CpuAutocast()) {
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

at::Tensor MaxPool(const at::Tensor& x, int k, int s, bool ceil_mode) {
  auto out_size = [&](int64_t n) {
    TORCH_CHECK(ceil_mode ? n >= 1 : n >= k, "MaxPool: input side ", n, " is smaller than the window ", k);
    int64_t o = (n - k + (ceil_mode ? s - 1 : 0)) / s + 1;
    if (ceil_mode && (o - 1) * s >= n) --o;  // the last window must start inside the input
    return o;
  };
  const int64_t oh = out_size(x.size(2)), ow = out_size(x.size(3));
  const int64_t need_h = (oh - 1) * s + k, need_w = (ow - 1) * s + k;
  const at::Tensor in = need_h > x.size(2) || need_w > x.size(3)
                            ? at::constant_pad_nd(x, {0, std::max<int64_t>(0, need_w - x.size(3)), 0,
                                                      std::max<int64_t>(0, need_h - x.size(2))},
                                                  -std::numeric_limits<double>::infinity())
                            : x;
  auto view = [&](int i, int j) {
    return in.slice(2, i, i + (oh - 1) * s + 1, s).slice(3, j, j + (ow - 1) * s + 1, s);
  };
  at::Tensor out = view(0, 0).clone(at::MemoryFormat::Contiguous);
  for (int i = 0; i < k; ++i) {
    for (int j = 0; j < k; ++j) {
      if (i != 0 || j != 0) at::maximum_out(out, out, view(i, j));
    }
  }
  return out;
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

at::Tensor TiledPrefix(const at::Tensor& x, const Prefix& prefix, int stride, int halo_px, int tile_px) {
  const int64_t h = x.size(2), w = x.size(3), s = stride;
  const int64_t tile = std::max<int64_t>(s, tile_px / s * s), halo = (halo_px + s - 1) / s * s;
  TORCH_CHECK(h % s == 0 && w % s == 0, "TiledPrefix: input ", h, "x", w, " is not a multiple of stride ", s);
  at::Tensor out;
  for (int64_t y0 = 0; y0 < h; y0 += tile) {
    const int64_t y1 = std::min(h, y0 + tile), wy0 = std::max<int64_t>(0, y0 - halo), wy1 = std::min(h, y1 + halo);
    for (int64_t x0 = 0; x0 < w; x0 += tile) {
      const int64_t x1 = std::min(w, x0 + tile), wx0 = std::max<int64_t>(0, x0 - halo), wx1 = std::min(w, x1 + halo);
      const at::Tensor part = prefix(x.slice(2, wy0, wy1).slice(3, wx0, wx1));
      TORCH_CHECK(part.dim() == 4 && part.size(2) == (wy1 - wy0) / s && part.size(3) == (wx1 - wx0) / s,
                  "TiledPrefix: a ", wy1 - wy0, "x", wx1 - wx0, " window gave ", part.sizes(), ", not 1/", s);
      if (!out.defined()) out = at::empty({x.size(0), part.size(1), h / s, w / s}, part.options());
      out.slice(2, y0 / s, y1 / s)
          .slice(3, x0 / s, x1 / s)
          .copy_(part.slice(2, (y0 - wy0) / s, (y1 - wy0) / s).slice(3, (x0 - wx0) / s, (x1 - wx0) / s));
    }
  }
  return out;
}

}  // namespace fusion::faceapi::ops
