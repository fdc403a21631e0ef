"""PyTorch mirror of FaceLandmark68Net (models/faceapi/face_landmark_68.h; MODELS.md §2.4(b)).
Input [N,3,112,112] fp32 RGB 0..255 -> [N,136] (x0,y0,x1,y1,... relative to the square)."""
import torch
import torch.nn.functional as F

from tf_ops import WeightModule, conv, depthwise_oihw, oihw, separable

MEAN = (122.782, 117.001, 104.298)


class FaceLandmark68Net(WeightModule):
    def __init__(self, w):
        super().__init__()
        self.register_buffer("mean", torch.tensor(MEAN).view(1, 3, 1, 1))
        for name, t in w.items():
            if name.endswith("depthwise_filter"):
                self.put(name, depthwise_oihw(t))
            elif name.endswith("filters") or name.endswith("pointwise_filter"):
                self.put(name, oihw(t))
            elif name == "fc/weights":
                self.put(name, t.t())  # [136,256] for F.linear
            else:
                self.put(name, t)

    def sep(self, x, p, stride):
        return separable(x, self.w(p + "/depthwise_filter"), self.w(p + "/pointwise_filter"), self.w(p + "/bias"), stride)

    def dense_block(self, x, d, first):
        if first:
            o1 = F.relu(conv(x, self.w(d + "/conv0/filters"), self.w(d + "/conv0/bias"), 2, True))
        else:
            o1 = F.relu(self.sep(x, d + "/conv0", 2))
        o2 = self.sep(o1, d + "/conv1", 1)
        o3 = self.sep(F.relu(o1 + o2), d + "/conv2", 1)
        o4 = self.sep(F.relu(o1 + o2 + o3), d + "/conv3", 1)
        return F.relu(o1 + o2 + o3 + o4)

    def forward(self, x):
        x = (x - self.mean) / 255.0
        x = self.dense_block(x, "dense0", True)
        for k in (1, 2, 3):
            x = self.dense_block(x, f"dense{k}", False)
        x = F.avg_pool2d(x, 7, 2)  # VALID: 7x7 -> 1x1
        return F.linear(x.flatten(1), self.w("fc/weights"), self.w("fc/bias"))
