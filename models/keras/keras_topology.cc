// Keras layers-model topology parser (keras_topology.h).
#include "models/keras/keras_topology.h"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace fusion::keras {
namespace {

using json = nlohmann::json;

absl::Status LayerError(std::string_view origin, const std::string& layer, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(origin), ": layer '", layer, "': ", what));
}

// Limits of what the interpreter runs (ESRGAN: 3x3 kernels, stride 1, x2/x4 scale).
constexpr int kMaxKernel = 64, kMaxStride = 64, kMaxFactor = 16, kMaxScale = 1024;
constexpr int64_t kMaxFilters = 1 << 20;

// An integer in [lo, hi]. json::get<int>() converts a float, or an integer past int's range,
// with undefined behaviour, so every integer of model.json is read through here. Throws
// (caught at ParseTopology's edge as "malformed model.json: ...").
int64_t IntIn(const json& v, int64_t lo, int64_t hi, const char* what) {
  if (!v.is_number_integer()) throw std::invalid_argument(absl::StrCat(what, " is not an integer"));
  if (v.is_number_unsigned()) {  // every non-negative integer parses as unsigned
    const uint64_t u = v.get<uint64_t>();
    if (hi < 0 || u > static_cast<uint64_t>(hi) || (lo > 0 && u < static_cast<uint64_t>(lo))) {
      throw std::out_of_range(absl::StrCat(what, " is not in [", lo, ", ", hi, "]"));
    }
    return static_cast<int64_t>(u);
  }
  const int64_t i = v.get<int64_t>();
  if (i < lo || i > hi) throw std::out_of_range(absl::StrCat(what, " is not in [", lo, ", ", hi, "]"));
  return i;
}

std::vector<int> IntsIn(const json& v, int64_t lo, int64_t hi, const char* what) {
  if (!v.is_array()) throw std::invalid_argument(absl::StrCat(what, " is not an array"));
  std::vector<int> out;
  for (const json& e : v) out.push_back(static_cast<int>(IntIn(e, lo, hi, what)));
  return out;
}

constexpr int64_t kIntMin = std::numeric_limits<int>::min(), kIntMax = std::numeric_limits<int>::max();

absl::Status ParseConv(const json& c, std::string_view origin, LayerSpec* l) {
  const auto ks = IntsIn(c.at("kernel_size"), 1, kMaxKernel, "kernel_size");
  const auto st = IntsIn(c.at("strides"), 1, kMaxStride, "strides");
  const auto dil = c.contains("dilation_rate") ? IntsIn(c.at("dilation_rate"), kIntMin, kIntMax, "dilation_rate")
                                               : std::vector<int>{1, 1};
  const std::string pad = c.at("padding"), act = c.value("activation", "linear");
  if (ks.size() != 2 || ks[0] != ks[1] || st.size() != 2 || st[0] != st[1]) {
    return LayerError(origin, l->name, "only square kernels and strides are supported");
  }
  if (dil != std::vector<int>{1, 1} || (c.contains("groups") && IntIn(c.at("groups"), kIntMin, kIntMax, "groups") != 1)) {
    return LayerError(origin, l->name, "dilation and groups must be 1");
  }
  if ((pad != "same" && pad != "valid") || (act != "linear" && act != "relu")) {
    return LayerError(origin, l->name, absl::StrCat("unsupported padding '", pad, "' or activation '", act, "'"));
  }
  l->kernel = ks[0], l->stride = st[0], l->same = pad == "same", l->relu = act == "relu";
  l->filters = IntIn(c.at("filters"), 1, kMaxFilters, "filters");
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
    const int64_t axis = c.contains("axis") ? IntIn(c.at("axis"), kIntMin, kIntMax, "axis") : -1;
    if (axis != 3 && axis != -1) return LayerError(origin, l->name, "only channel-axis concatenation is supported");
    l->op = Op::kConcat;
  } else if (cls == "Add") {
    l->op = Op::kAdd;
  } else if (cls == "UpSampling2D") {
    const auto size = IntsIn(c.at("size"), kIntMin, kIntMax, "size");
    if (c.value("interpolation", "nearest") != "nearest" || size.size() != 2 || size[0] != size[1] || size[0] < 1 ||
        size[0] > kMaxFactor) {
      return LayerError(origin, l->name, "only nearest, square, integer upsampling is supported");
    }
    l->op = Op::kUpsample, l->factor = size[0];
  } else if (cls == "MultiplyBeta") {
    l->op = Op::kMultiplyBeta;
  } else if (cls.rfind("PixelShuffle", 0) == 0) {
    l->op = Op::kPixelShuffle, l->factor = static_cast<int>(IntIn(c.at("scale"), 1, kMaxFactor, "scale"));
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
        if (shape.size() == 4 && shape[3].is_number()) {
          t.input_channels = static_cast<int>(IntIn(shape[3], 1, 65536, "batch_input_shape channels"));
        }
      }
      Propagate(t.layers, &l, &t.tileable);
      if (l.scale > kMaxScale) {
        return LayerError(origin, l.name, absl::StrCat("the model's scale exceeds ", kMaxScale));
      }
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
