// Keras layers-model interpreter (keras_model.h).
#include "models/keras/keras_model.h"

#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "models/common/exception_text.h"
#include "absl/strings/str_cat.h"
#include "models/keras/keras_topology.h"
#include "models/tfjs/weights.h"

namespace fusion::keras {

// A layer as parsed (keras_topology.h) with its weights bound.
struct Layer : LayerSpec {
  at::Tensor weight, bias;  // conv: OIHW, [O] (bias may be undefined)
};

namespace {

absl::Status LayerError(std::string_view origin, const std::string& layer, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(std::string(origin), ": layer '", layer, "': ", what));
}

// TF "SAME": out = ceil(in/s), total = max((out-1)*s + k - in, 0), before = total/2.
std::pair<int64_t, int64_t> SamePad(int64_t in, int k, int s) {
  const int64_t out = (in + s - 1) / s;
  const int64_t total = std::max<int64_t>((out - 1) * s + k - in, 0);
  return {total / 2, total - total / 2};
}

// Binds a conv layer's kernel (HWIO in the weights, checked against kernel_size and filters)
// and bias.
absl::Status BindConv(const tfjs::WeightMap& w, std::string_view origin, Layer* l) {
  auto kernel = w.Get(l->name + "/kernel");
  if (!kernel.ok()) return LayerError(origin, l->name, std::string(kernel.status().message()));
  if (kernel->dim() != 4 || kernel->size(0) != l->kernel || kernel->size(1) != l->kernel ||
      kernel->size(3) != l->filters) {
    return LayerError(origin, l->name, "kernel shape does not match kernel_size/filters");
  }
  l->weight = kernel->permute({3, 2, 0, 1}).contiguous();  // HWIO -> OIHW
  if (l->use_bias) {
    auto bias = w.Get(l->name + "/bias", {l->filters});
    if (!bias.ok()) return LayerError(origin, l->name, std::string(bias.status().message()));
    l->bias = *bias;
  }
  return absl::OkStatus();
}

at::Tensor RunConv(const Layer& l, const at::Tensor& x) {
  at::Tensor in = x;
  if (l.same && l.kernel > 1) {
    const auto [top, bottom] = SamePad(x.size(2), l.kernel, l.stride);
    const auto [left, right] = SamePad(x.size(3), l.kernel, l.stride);
    in = at::constant_pad_nd(x, {left, right, top, bottom}, 0.0);
  }
  at::Tensor y;
  // Under CPU autocast (a bf16 model, pipeline/stages.cc) at::conv2d is the op autocast casts;
  // at::mkldnn_convolution is not in its list and would stay fp32.
  if (in.is_cpu() && at::hasMKLDNN() && !at::autocast::is_cpu_enabled()) {
    // Debian's LibTorch has no optimised BLAS and at::conv2d takes its slow BLAS path for batch-1
    // CPU convolutions; oneDNN directly is several times faster (fusion_bench).
    const c10::optional<at::Tensor> bias = l.bias.defined() ? c10::optional<at::Tensor>(l.bias) : c10::nullopt;
    y = at::mkldnn_convolution(in.contiguous(), l.weight, bias, {0, 0}, {l.stride, l.stride}, {1, 1}, 1);
  } else {
    y = at::conv2d(in, l.weight, l.bias, {l.stride, l.stride});
  }
  return l.relu ? at::relu(y) : y;
}

at::Tensor RunLayer(const Layer& l, const std::vector<at::Tensor>& in, const at::Tensor& x) {
  switch (l.op) {
    case Op::kInput: return x;
    case Op::kConv: return RunConv(l, in[0]);
    case Op::kRelu: return at::relu(in[0]);
    case Op::kConcat: return at::cat(in, 1);
    case Op::kAdd: {
      at::Tensor sum = in[0];
      for (size_t i = 1; i < in.size(); ++i) sum = sum + in[i];
      return sum;
    }
    case Op::kUpsample: {
      const int64_t f = l.factor;
      return at::upsample_nearest2d(in[0], {in[0].size(2) * f, in[0].size(3) * f});
    }
    case Op::kMultiplyBeta: return in[0] * 0.2;
    case Op::kPixelShuffle: {
      // depthToSpace DCR: out[c, h*s+i, w*s+j] = in[(i*s+j)*C' + c, h, w].
      const int64_t s = l.factor, n = in[0].size(0), h = in[0].size(2), w = in[0].size(3);
      const int64_t co = in[0].size(1) / (s * s);
      return in[0].view({n, s, s, co, h, w}).permute({0, 3, 4, 1, 5, 2}).reshape({n, co, h * s, w * s});
    }
  }
  return {};
}

}  // namespace

KerasModel::~KerasModel() = default;

absl::StatusOr<std::unique_ptr<KerasModel>> KerasModel::Load(const std::filesystem::path& model_json) {
  std::ifstream f(model_json);
  if (!f) return absl::NotFoundError(absl::StrCat("Keras model not found: ", model_json.string()));
  std::stringstream text;
  text << f.rdbuf();
  auto weights = tfjs::LoadWeights(model_json);
  if (!weights.ok()) return weights.status();
  return FromJson(text.str(), *weights, model_json.string());
}

absl::StatusOr<std::unique_ptr<KerasModel>> KerasModel::FromJson(std::string_view model_json,
                                                                 const tfjs::WeightMap& weights,
                                                                 std::string_view origin) {
  absl::StatusOr<Topology> topology = ParseTopology(model_json, origin);
  if (!topology.ok()) return topology.status();
  std::unique_ptr<KerasModel> m(new KerasModel());
  m->origin_ = std::string(origin);
  for (LayerSpec& spec : topology->layers) {
    auto l = std::make_unique<Layer>();
    static_cast<LayerSpec&>(*l) = std::move(spec);
    if (l->op == Op::kConv) {
      if (absl::Status s = BindConv(weights, origin, l.get()); !s.ok()) return s;
    }
    m->layers_.push_back(std::move(l));
  }
  m->input_channels_ = topology->input_channels;
  m->output_layer_ = topology->output_layer;
  m->tileable_ = topology->tileable;
  m->last_use_.assign(m->layers_.size(), -1);
  for (size_t i = 0; i < m->layers_.size(); ++i) {
    for (int k : m->layers_[i]->inputs) m->last_use_[k] = static_cast<int>(i);
  }
  const Layer& out = *m->layers_[m->output_layer_];
  m->scale_ = out.scale;
  m->halo_px_ = static_cast<int>(std::ceil(out.halo));
  return m;
}

absl::StatusOr<at::Tensor> KerasModel::Forward(const at::Tensor& x) const {
  if (!x.defined() || x.dim() != 4 || x.size(1) != input_channels_ || x.scalar_type() != at::kFloat) {
    return absl::InvalidArgumentError(absl::StrCat(origin_, ": input must be [N,", input_channels_, ",H,W] float32"));
  }
  std::vector<at::Tensor> values(layers_.size());
  size_t i = 0;
  try {
    for (; i < layers_.size(); ++i) {
      std::vector<at::Tensor> in;
      for (int k : layers_[i]->inputs) in.push_back(values[k]);
      values[i] = RunLayer(*layers_[i], in, x);
      // Drop activations nobody reads any more: the working set is the live frontier only.
      for (int k : layers_[i]->inputs) {
        if (last_use_[k] == static_cast<int>(i) && k != output_layer_) values[k] = at::Tensor();
      }
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(origin_, ": layer '", layers_[i]->name, "' failed: ", ExceptionText(e)));
  }
  return values[output_layer_];
}

absl::Status KerasModel::MoveTo(const at::Device& device) {
  try {
    // To CUDA: through pinned host memory, without blocking, on the current stream (params.cc).
    auto move = [&](const at::Tensor& t) {
      return device.is_cuda() ? t.pin_memory().to(device, /*non_blocking=*/true) : t.to(device);
    };
    for (auto& l : layers_) {
      if (l->weight.defined()) l->weight = move(l->weight);
      if (l->bias.defined()) l->bias = move(l->bias);
    }
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(origin_, ": copy to ", device.str(), " failed: ", ExceptionText(e)));
  }
}

uint64_t KerasModel::parameter_bytes() const {
  uint64_t bytes = 0;
  for (const auto& l : layers_) {
    if (l->weight.defined()) bytes += l->weight.numel() * 4;
    if (l->bias.defined()) bytes += l->bias.numel() * 4;
  }
  return bytes;
}

}  // namespace fusion::keras
