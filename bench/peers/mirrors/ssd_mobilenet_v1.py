"""PyTorch mirror of SsdMobilenetV1 (models/faceapi/ssd_mobilenet_v1.h; MODELS.md §2.4(d)):
MobileNetV1 backbone, 6 SSD box predictors, box decoding against the 5118 priors.
Input [N,3,512,512] fp32 RGB 0..255 -> flat [N*5118*4 boxes (ymin,xmin,ymax,xmax), N*5118 scores]
(fusiond_nets.h's flattening of Forward's {boxes, scores})."""
import torch
import torch.nn.functional as F

from tf_ops import WeightModule, conv, depthwise_oihw, oihw

BN_EPSILON = 0.0010000000474974513  # face-api mobileNetV1.ts
STRIDE_TWO = (2, 4, 6, 12)


def _relu6(x):
    return torch.clamp(x, 0.0, 6.0)


class SsdMobilenetV1(WeightModule):
    def __init__(self, w):
        super().__init__()
        for name, t in w.items():
            if name.endswith("/depthwise_weights"):
                self.put(name, depthwise_oihw(t))
            elif name.endswith("/weights"):
                self.put(name, oihw(t))
            elif name.endswith("/moving_variance"):  # folded below, as the port folds them per call
                d = name[: -len("/BatchNorm/moving_variance")]
                scale = w[d + "/BatchNorm/gamma"] / torch.sqrt(t + BN_EPSILON)
                shift = w[d + "/BatchNorm/beta"] - w[d + "/BatchNorm/moving_mean"] * scale
                self.put(d + "/bn_scale", scale.view(1, -1, 1, 1))
                self.put(d + "/bn_shift", shift.view(1, -1, 1, 1))
            elif "/BatchNorm/" in name:
                continue
            elif name == "Output/extra_dim":
                prior = t.float()  # [1,5118,4]: ymin, xmin, ymax, xmax
                ph, pw = prior[:, :, 2:3] - prior[:, :, 0:1], prior[:, :, 3:4] - prior[:, :, 1:2]
                self.put("ph", ph)
                self.put("pw", pw)
                self.put("pcy", prior[:, :, 0:1] + ph / 2)
                self.put("pcx", prior[:, :, 1:2] + pw / 2)
            else:
                self.put(name, t)

    def pointwise(self, x, p, stride):
        return _relu6(conv(x, self.w(p + "/weights"), self.w(p + "/convolution_bn_offset"), stride, True))

    def depthwise(self, x, d, stride):
        y = conv(x, self.w(d + "/depthwise_weights"), None, stride, True, groups=int(x.shape[1]))
        return _relu6(y * self.w(d + "/bn_scale") + self.w(d + "/bn_shift"))

    def layer(self, x, i):
        x = self.depthwise(x, f"MobilenetV1/Conv2d_{i}_depthwise", 2 if i in STRIDE_TWO else 1)
        return self.pointwise(x, f"MobilenetV1/Conv2d_{i}_pointwise", 1)

    def box_predictor(self, x, k):
        b = f"Prediction/BoxPredictor_{k}"
        n = int(x.shape[0])
        box = F.conv2d(x, self.w(b + "/BoxEncodingPredictor/weights"), self.w(b + "/BoxEncodingPredictor/biases"))
        cls = F.conv2d(x, self.w(b + "/ClassPredictor/weights"), self.w(b + "/ClassPredictor/biases"))
        return box.permute(0, 2, 3, 1).reshape(n, -1, 4), cls.permute(0, 2, 3, 1).reshape(n, -1, 3)

    def forward(self, x):
        x = self.pointwise(x / 127.5 - 1.0, "MobilenetV1/Conv2d_0_pointwise", 2)
        conv11 = None
        for i in range(1, 14):
            x = self.layer(x, i)
            if i == 11:
                conv11 = x
        feats, f = [], x
        for k in range(8):
            f = self.pointwise(f, f"Prediction/Conv2d_{k}_pointwise", 2 if k % 2 else 1)
            feats.append(f)
        enc, cls = zip(*(self.box_predictor(t, k) for k, t in enumerate([conv11, x, feats[1], feats[3], feats[5], feats[7]])))
        t = torch.cat(enc, 1)  # [N,5118,4]: ty, tx, th, tw
        cy = t[:, :, 0:1] / 10 * self.ph + self.pcy
        cx = t[:, :, 1:2] / 10 * self.pw + self.pcx
        hh = torch.exp(t[:, :, 2:3] / 5) * self.ph / 2
        hw = torch.exp(t[:, :, 3:4] / 5) * self.pw / 2
        boxes = torch.cat([cy - hh, cx - hw, cy + hh, cx + hw], 2)
        scores = torch.sigmoid(torch.cat(cls, 1)[:, :, 1:2])
        return torch.cat([boxes.reshape(-1), scores.reshape(-1)])
