"""PyTorch mirror of FaceRecognitionNet, dlib's ResNet-29 (models/faceapi/face_recognition.h;
MODELS.md §2.4(c)). Input [N,3,150,150] fp32 RGB 0..255 -> [N,128] descriptor."""
import torch
import torch.nn.functional as F

from tf_ops import WeightModule, conv, pad, oihw

MEAN = (122.782, 117.001, 104.298)
BLOCKS = [("conv32_1", False), ("conv32_2", False), ("conv32_3", False),
          ("conv64_down", True), ("conv64_1", False), ("conv64_2", False), ("conv64_3", False),
          ("conv128_down", True), ("conv128_1", False), ("conv128_2", False),
          ("conv256_down", True), ("conv256_1", False), ("conv256_2", False), ("conv256_down_out", True)]


class FaceRecognitionNet(WeightModule):
    def __init__(self, w):
        super().__init__()
        self.register_buffer("mean", torch.tensor(MEAN).view(1, 3, 1, 1))
        prefixes = ["conv32_down"] + [f"{b}/conv{j}" for b, _ in BLOCKS for j in (1, 2)]
        for p in prefixes:
            self.put(p + "/conv/filters", oihw(w[p + "/conv/filters"]))
            self.put(p + "/conv/bias", w[p + "/conv/bias"])
            self.put(p + "/scale/weights", w[p + "/scale/weights"].view(1, -1, 1, 1))
            self.put(p + "/scale/biases", w[p + "/scale/biases"].view(1, -1, 1, 1))
        self.put("fc", w["fc"].t())  # [128,256] for F.linear (x @ fc)

    def conv_layer(self, x, p, stride, relu, same):
        y = conv(x, self.w(p + "/conv/filters"), self.w(p + "/conv/bias"), stride, same)
        y = y * self.w(p + "/scale/weights") + self.w(p + "/scale/biases")
        return F.relu(y) if relu else y

    def residual(self, x, p):
        o = self.conv_layer(x, p + "/conv1", 1, True, True)
        o = self.conv_layer(o, p + "/conv2", 1, False, True)
        return F.relu(o + x)

    def residual_down(self, x, p):
        o = self.conv_layer(x, p + "/conv1", 2, True, False)
        o = self.conv_layer(o, p + "/conv2", 1, False, True)
        pooled = F.avg_pool2d(x, 2, 2)
        if int(pooled.shape[2]) != int(o.shape[2]):  # dlib: a zero row at the bottom, a zero column at the right
            o = pad(o, (0, 1, 0, 1))
        if int(pooled.shape[1]) != int(o.shape[1]):  # the shortcut's extra channels are zero
            c = int(pooled.shape[1])
            return F.relu(torch.cat([o[:, :c] + pooled, o[:, c:]], 1))
        return F.relu(pooled + o)

    def forward(self, x):
        x = (x - self.mean) / 255.0
        x = self.conv_layer(x, "conv32_down", 2, True, False)
        x = F.max_pool2d(x, 3, 2)
        for name, down in BLOCKS:
            x = self.residual_down(x, name) if down else self.residual(x, name)
        return F.linear(F.adaptive_avg_pool2d(x, 1).flatten(1), self.w("fc"))
