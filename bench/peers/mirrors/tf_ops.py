"""TF semantics on NCHW torch tensors, for the mirrors (as models/faceapi/ops.h does in C++).
TF "SAME" padding is asymmetric: out = ceil(in/s), total = max((out-1)*s + k - in, 0),
before = total // 2, after = the rest (shared/docs/MODELS.md §2.3). Every op here exports to
plain ONNX (Pad, Conv, MaxPool, ...) that ONNX Runtime and OpenCV dnn 4.6 both import, at the
opset of export.py (10: OpenCV 4.6 imports Clip, hence ReLU6 and clamps, only with min/max as
attributes, which opset 11 made inputs)."""
import torch
import torch.nn.functional as F


def same_pad(size, k, s):
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


class _Pad(torch.autograd.Function):
    """F.pad of H and W that exports as one ONNX Pad with constant pads (torch 1.13's own export
    of F.pad builds the pads at run time from Shape/ConstantOfShape/Slice/Transpose nodes)."""

    @staticmethod
    def forward(ctx, x, lrtb, value):
        return F.pad(x, lrtb, value=value)

    @staticmethod
    def symbolic(g, x, lrtb, value):  # Pad-2 (opset <= 10): pads and value as attributes
        l, r, t, b = lrtb
        return g.op("Pad", x, pads_i=[0, 0, t, l, 0, 0, b, r], value_f=value, mode_s="constant")


def pad(x, lrtb, value=0.0):
    """Pads W by (left, right) and H by (top, bottom) with `value`."""
    return _Pad.apply(x, tuple(int(v) for v in lrtb), float(value))


def pad_same(x, k, s, value=0.0):
    t, b = same_pad(int(x.shape[2]), k, s)
    l, r = same_pad(int(x.shape[3]), k, s)
    if t == b == l == r == 0:
        return x
    return pad(x, (l, r, t, b), value)


def oihw(hwio):
    """TF conv filter [kh,kw,Cin,Cout] -> torch [Cout,Cin,kh,kw]."""
    return hwio.permute(3, 2, 0, 1).contiguous()


def depthwise_oihw(w):
    """TF depthwise filter [kh,kw,C,1] -> torch [C,1,kh,kw] (groups = C)."""
    return w.permute(2, 3, 0, 1).contiguous()


def conv(x, w_oihw, b=None, stride=1, same=False, groups=1):
    k = w_oihw.shape[2]
    return F.conv2d(pad_same(x, k, stride) if same else x, w_oihw, b, stride, 0, 1, int(groups))


def separable(x, dw, pw, b, stride):
    """Depthwise 3x3 (TF SAME) then pointwise 1x1 plus bias (ops::SeparableConv)."""
    y = conv(x, dw, None, stride, True, groups=x.shape[1])
    return F.conv2d(y, pw, b)


class WeightModule(torch.nn.Module):
    """Holds converted weights as buffers (they become ONNX initializers) under sanitised names."""

    def put(self, name, tensor):
        self.register_buffer(name.replace("/", "__"), tensor.float().contiguous())

    def w(self, name):
        return getattr(self, name.replace("/", "__"))

