"""PyTorch mirror of TinyFaceDetector (models/faceapi/tiny_face_detector.h; MODELS.md §2.4(a)).
Input [N,3,S,S] fp32 RGB 0..255 -> [N,25,S/32,S/32] raw (before sigmoid/decoding)."""
import torch
import torch.nn.functional as F

from tf_ops import WeightModule, conv, pad, depthwise_oihw, oihw

MEAN = (117.001, 114.697, 97.404)


class TinyFaceDetector(WeightModule):
    def __init__(self, w):
        super().__init__()
        self.register_buffer("mean", torch.tensor(MEAN).view(1, 3, 1, 1))
        self.put("conv0/filters", oihw(w["conv0/filters"]))
        self.put("conv0/bias", w["conv0/bias"])
        for i in range(1, 6):
            self.put(f"conv{i}/depthwise_filter", depthwise_oihw(w[f"conv{i}/depthwise_filter"]))
            self.put(f"conv{i}/pointwise_filter", oihw(w[f"conv{i}/pointwise_filter"]))
            self.put(f"conv{i}/bias", w[f"conv{i}/bias"])
        self.put("conv8/filters", oihw(w["conv8/filters"]))
        self.put("conv8/bias", w["conv8/bias"])

    def forward(self, x):
        x = (x - self.mean) / 255.0
        x = F.leaky_relu(conv(x, self.w("conv0/filters"), self.w("conv0/bias")), 0.1)
        x = F.max_pool2d(x, 2, 2, ceil_mode=True)  # TF 2x2/2 SAME: -inf at bottom/right on odd sides
        for i in range(1, 6):
            x = pad(x, (1, 1, 1, 1))
            x = conv(x, self.w(f"conv{i}/depthwise_filter"), groups=x.shape[1])
            x = F.leaky_relu(conv(x, self.w(f"conv{i}/pointwise_filter"), self.w(f"conv{i}/bias")), 0.1)
            if i < 5:
                x = F.max_pool2d(x, 2, 2, ceil_mode=True)
            else:  # 2x2 stride 1 SAME: one -inf row/column at the bottom/right
                x = F.max_pool2d(pad(x, (0, 1, 0, 1), float("-inf")), 2, 1)
        return conv(x, self.w("conv8/filters"), self.w("conv8/bias"))
