// Keras layers-model topology parser (keras_topology.h).
#include "models/keras/keras_topology.h"

#include <map>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fusion::keras {
namespace {

using json = nlohmann::json;

absl::Status LayerError(std::string_view origin, const std::string& layer, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(origin), ": layer '", layer, "': ", what));
}

absl::Status ParseConv(const json& c, std::string_view origin, LayerSpec* l) {
  const auto ks = c.at("kernel_size").get<std::vector<int>>();
  const auto st = c.at("strides").get<std::vector<int>>();
  const auto dil = c.value("dilation_rate", std::vector<int>{1, 1});
  const std::string pad = c.at("padding"), act = c.value("activation", "linear");
  if (ks.size() != 2 || ks[0] != ks[1] || st.size() != 2 || st[0] != st[1]) {
    return LayerError(origin, l->name, "only square kernels and strides are supported");
  }
  if (dil != std::vector<int>{1, 1} || c.value("groups", 1) != 1) {
    return LayerError(origin, l->name, "dilation and groups must be 1");
  }
  if ((pad != "same" && pad != "valid") || (act != "linear" && act != "relu")) {
    return LayerError(origin, l->name, absl::StrCat("unsupported padding '", pad, "' or activation '", act, "'"));
  }
  l->kernel = ks[0], l->stride = st[0], l->same = pad == "same", l->relu = act == "relu";
  l->filters = c.at("filters").get<int64_t>();
  l->use_bias = c.value("use_bias", true);
  return absl::OkStatus();
}

absl::Status ParseLayer(const json& j, std::string_view origin, LayerSpec* l) {
  const std::string cls = j.at("class_name");
  const json& c = j.at("config");
  if (cls == "InputLayer") {
    l->op = Op::kInput;
  } else if (cls == "Conv2D") {
    l->op = Op::kConv;
    return ParseConv(c, origin, l);
  } else if (cls == "Activation") {
    if (c.value("activation", "") != "relu") return LayerError(origin, l->name, "only relu activations are supported");
    l->op = Op::kRelu;
  } else if (cls == "Concatenate") {
    const int axis = c.value("axis", -1);
    if (axis != 3 && axis != -1) return LayerError(origin, l->name, "only channel-axis concatenation is supported");
    l->op = Op::kConcat;
  } else if (cls == "Add") {
    l->op = Op::kAdd;
  } else if (cls == "UpSampling2D") {
    const auto size = c.at("size").get<std::vector<int>>();
    if (c.value("interpolation", "nearest") != "nearest" || size.size() != 2 || size[0] != size[1] || size[0] < 1) {
      return LayerError(origin, l->name, "only nearest, square, integer upsampling is supported");
    }
    l->op = Op::kUpsample, l->factor = size[0];
  } else if (cls == "MultiplyBeta") {
    l->op = Op::kMultiplyBeta;
  } else if (cls.rfind("PixelShuffle", 0) == 0) {
    l->op = Op::kPixelShuffle, l->factor = c.at("scale").get<int>();
  } else {
    return LayerError(origin, l->name, absl::StrCat("unsupported layer class '", cls, "'"));
  }
  return absl::OkStatus();
}

// Receptive-field bookkeeping for tiling (keras_model.h).
void Propagate(const std::vector<LayerSpec>& layers, LayerSpec* l, bool* tileable) {
  for (int i : l->inputs) {
    l->halo = std::max(l->halo, layers[i].halo);
    l->scale = std::max(l->scale, layers[i].scale);
  }
  if (l->op == Op::kConv) {
    if (l->stride != 1 || (!l->same && l->kernel != 1)) *tileable = false;
    l->halo += (l->kernel - 1) / 2.0 / l->scale;
  } else if (l->op == Op::kUpsample || l->op == Op::kPixelShuffle) {
    l->scale *= l->factor;
  }
}

}  // namespace

absl::StatusOr<Topology> ParseTopology(std::string_view model_json, std::string_view origin) {
  Topology t;
  std::map<std::string, int> index;
  std::string current = "(topology)";
  try {
    const json doc = json::parse(model_json);
    const json& cfg = doc.at("modelTopology").at("model_config").at("config");
    for (const json& j : cfg.at("layers")) {
      LayerSpec l;
      l.name = current = j.at("name").get<std::string>();
      for (const json& node : j.at("inbound_nodes")) {
        for (const json& ref : node) {
          auto it = index.find(ref.at(0).get<std::string>());
          if (it == index.end()) return LayerError(origin, l.name, absl::StrCat("unknown inbound layer '", ref.at(0).get<std::string>(), "'"));
          l.inputs.push_back(it->second);
        }
      }
      if (auto s = ParseLayer(j, origin, &l); !s.ok()) return s;
      if (l.op != Op::kInput && l.inputs.empty()) return LayerError(origin, l.name, "has no inbound layer");
      if (l.op == Op::kInput) {
        const auto shape = j.at("config").at("batch_input_shape");
        if (shape.size() == 4 && shape[3].is_number()) t.input_channels = shape[3].get<int>();
      }
      Propagate(t.layers, &l, &t.tileable);
      index[l.name] = static_cast<int>(t.layers.size());
      t.layers.push_back(std::move(l));
    }
    current = "(output_layers)";
    const std::string out = cfg.at("output_layers").at(0).at(0);
    if (!index.count(out)) return LayerError(origin, out, "output layer is not defined");
    t.output_layer = index[out];
  } catch (const std::exception& e) {
    return LayerError(origin, current, absl::StrCat("malformed model.json: ", e.what()));
  }
  return t;
}

}  // namespace fusion::keras
