"""PyTorch mirror of the ESRGAN enhance stage (models/keras/enhancer.h): a generic executor of the
UpscalerJS Keras layers-model (as models/keras/keras_model.h and shared/reference/upscaler_ref.py)
for the layer types of esrgan-slim / esrgan-medium: InputLayer, Conv2D (stride 1, "same" or
"valid", linear|relu), Activation(relu), Concatenate, Add, UpSampling2D (nearest), wrapped as the
Enhancer wraps it: x * 255 -> model -> / 255, clamped to 0..1.
Input [1,3,H,W] fp32 RGB 0..1 -> [1,3,sH,sW]."""
import torch
import torch.nn.functional as F

from tf_ops import WeightModule, conv, oihw


class Esrgan(WeightModule):
    def __init__(self, config, w):
        super().__init__()
        self.layers = []
        for L in config["layers"]:
            c, name, kind = L["config"], L["name"], L["class_name"]
            ins = [i[0] for i in L["inbound_nodes"][0]] if L["inbound_nodes"] else []
            spec = {"name": name, "kind": kind, "ins": ins}
            if kind == "Conv2D":
                assert c["strides"] == [1, 1] and c["activation"] in ("linear", "relu"), (name, c)
                assert c.get("dilation_rate", [1, 1]) == [1, 1], name
                self.put(name + "/kernel", oihw(w[name + "/kernel"]))
                if c.get("use_bias", True):
                    self.put(name + "/bias", w[name + "/bias"])
                spec.update(same=c["padding"] == "same", relu=c["activation"] == "relu", bias=c.get("use_bias", True))
            elif kind == "Activation":
                assert c["activation"] == "relu", name
            elif kind == "UpSampling2D":
                spec["factor"] = int(c["size"][0])
            elif kind not in ("InputLayer", "Concatenate", "Add"):
                raise NotImplementedError(f"{kind} ({name})")
            self.layers.append(spec)
        self.output = config["output_layers"][0][0]

    def run(self, x):
        t = {}
        for L in self.layers:
            ins = [t[i] for i in L["ins"]]
            k = L["kind"]
            if k == "InputLayer":
                y = x
            elif k == "Conv2D":
                n = L["name"]
                y = conv(ins[0], self.w(n + "/kernel"), self.w(n + "/bias") if L["bias"] else None, 1, L["same"])
                y = F.relu(y) if L["relu"] else y
            elif k == "Activation":
                y = F.relu(ins[0])
            elif k == "Concatenate":
                y = torch.cat(ins, 1)
            elif k == "Add":
                y = ins[0]
                for other in ins[1:]:
                    y = y + other
            else:  # UpSampling2D, nearest
                y = F.interpolate(ins[0], scale_factor=L["factor"], mode="nearest")
            t[L["name"]] = y
        return t[self.output]

    def forward(self, rgb01):
        return torch.clamp(self.run(rgb01 * 255.0) / 255.0, 0.0, 1.0)
