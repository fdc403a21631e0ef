// Keras layers-model interpreter (keras_model.h).
#include "models/keras/keras_model.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <fstream>
#include <sstream>

#include "models/common/exception_text.h"
#include "models/common/torch_autocast.h"
#include "absl/strings/str_cat.h"
#include "models/keras/keras_topology.h"
#include "models/onednn/program.h"
#include "models/tfjs/weights.h"
#include "base/status_macros.h"

namespace fusion::keras {
namespace {
// The catalogue's name of a model from its origin ".../esrgan-slim/x2/model.json":
// "esrgan-slim-x2" (the key FUSION_ONEDNN_PRECISION uses); the origin itself otherwise.
std::string CatalogueName(const std::string& origin) {
  const std::filesystem::path p(origin);
  if (p.filename() != "model.json" || !p.has_parent_path() || !p.parent_path().has_parent_path()) return origin;
  return p.parent_path().parent_path().filename().string() + "-" + p.parent_path().filename().string();
}
}  // namespace

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
  // HWIO -> OIHW; a view (no copy) when the CPU fast path packs it right away (FromJson).
  l->weight = kernel->permute({3, 2, 0, 1});
  if (!onednn::Enabled()) l->weight = l->weight.contiguous();
  if (l->use_bias) {
    auto bias = w.Get(l->name + "/bias", {l->filters});
    if (!bias.ok()) return LayerError(origin, l->name, std::string(bias.status().message()));
    l->bias = *bias;
  }
  return absl::OkStatus();
}

using PlainWeights = std::map<std::string, at::Tensor>;

at::Tensor RunConv(const Layer& l, const at::Tensor& x, const PlainWeights& plain) {
  const at::Tensor& weight = l.weight.defined() ? l.weight : plain.at(l.name);
  at::Tensor in = x;
  if (l.same && l.kernel > 1) {
    const auto [top, bottom] = SamePad(x.size(2), l.kernel, l.stride);
    const auto [left, right] = SamePad(x.size(3), l.kernel, l.stride);
    in = at::constant_pad_nd(x, {left, right, top, bottom}, 0.0);
  }
  at::Tensor y;
  // Under CPU autocast (a bf16 model, pipeline/stages.cc) at::conv2d is the op autocast casts;
  // at::mkldnn_convolution is not in its list and would stay fp32.
  if (in.is_cpu() && at::hasMKLDNN() && !torch_compat::CpuAutocast()) {
    // Debian's LibTorch has no optimised BLAS and at::conv2d takes its slow BLAS path for batch-1
    // CPU convolutions; oneDNN directly is several times faster (fusion_bench).
    const c10::optional<at::Tensor> bias = l.bias.defined() ? c10::optional<at::Tensor>(l.bias) : c10::nullopt;
    y = at::mkldnn_convolution(in.contiguous(), weight, bias, {0, 0}, {l.stride, l.stride}, {1, 1}, 1);
  } else {
    y = at::conv2d(in, weight, l.bias, {l.stride, l.stride});
  }
  return l.relu ? at::relu(y) : y;
}

at::Tensor RunLayer(const Layer& l, const std::vector<at::Tensor>& in, const at::Tensor& x,
                    const PlainWeights& plain) {
  switch (l.op) {
    case Op::kInput: return x;
    case Op::kConv: return RunConv(l, in[0], plain);
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

KerasModel::KerasModel() = default;
KerasModel::~KerasModel() = default;

absl::StatusOr<std::unique_ptr<KerasModel>> KerasModel::Load(const std::filesystem::path& model_json) {
  std::ifstream f(model_json);
  if (!f) return absl::NotFoundError(absl::StrCat("Keras model not found: ", model_json.string()));
  std::stringstream text;
  text << f.rdbuf();
  ASSIGN_OR_RETURN(auto weights, tfjs::LoadWeights(model_json));
  return FromJson(text.str(), weights, model_json.string());
}

absl::StatusOr<std::unique_ptr<KerasModel>> KerasModel::FromJson(std::string_view model_json,
                                                                 const tfjs::WeightMap& weights,
                                                                 std::string_view origin, bool bf16) {
  ASSIGN_OR_RETURN(Topology topology, ParseTopology(model_json, origin));
  std::unique_ptr<KerasModel> m(new KerasModel());
  m->origin_ = std::string(origin);
  for (LayerSpec& spec : topology.layers) {
    auto l = std::make_unique<Layer>();
    static_cast<LayerSpec&>(*l) = std::move(spec);
    if (l->op == Op::kConv) {
      RETURN_IF_ERROR(BindConv(weights, origin, l.get()));
    }
    m->layers_.push_back(std::move(l));
  }
  m->input_channels_ = topology.input_channels;
  m->output_layer_ = topology.output_layer;
  m->tileable_ = topology.tileable;
  m->last_use_.assign(m->layers_.size(), -1);
  for (size_t i = 0; i < m->layers_.size(); ++i) {
    for (int k : m->layers_[i]->inputs) m->last_use_[k] = static_cast<int>(i);
  }
  const Layer& out = *m->layers_[m->output_layer_];
  m->scale_ = out.scale;
  m->halo_px_ = static_cast<int>(std::ceil(out.halo));
  for (const auto& l : m->layers_) {
    if (l->weight.defined()) m->parameter_bytes_ += l->weight.numel() * 4;
    if (l->bias.defined()) m->parameter_bytes_ += l->bias.numel() * 4;
  }
  const bool on_cpu = std::all_of(m->layers_.begin(), m->layers_.end(),
                                  [](const auto& l) { return !l->weight.defined() || l->weight.is_cpu(); });
  if (on_cpu && onednn::Enabled()) {
    if (absl::Status s = m->Compile(bf16); !s.ok() && !absl::IsUnimplemented(s)) return s;
  }
  for (auto& l : m->layers_) {  // the at:: path (not compiled) wants them contiguous
    if (l->weight.defined()) l->weight = l->weight.contiguous();
  }
  return m;
}

namespace {

using Layers = std::vector<std::unique_ptr<Layer>>;

// How Compile maps the layers (index: layer) onto oneDNN steps.
struct Fusions {
  std::vector<std::vector<int>> readers;  // the layers reading each layer
  std::vector<bool> fp32_tail;            // a conv kept fp32 in bf16
  std::vector<bool> relu_after;           // a conv that takes its reader's ReLU as its post-op
  std::vector<int> upsampled_conv;        // f: a conv run on the low-resolution side of an upsample by f
};

// A nearest upsample by f whose only reader is a stride-1 "same" conv (ESRGAN's SR: 3x3, 48 ->
// 3 channels at 4x the side, 0.4-0.6 of slim-x4's time in a kernel made for more outputs) runs
// as one conv on the low-resolution side with f*f times the output channels, then a
// depthToSpace (upsampled_conv[i] = f): output pixel (f*y+i2, f*x+j2) reads upsampled rows
// f*y+i2-r .. f*y+i2+r, i.e. low-resolution rows y + floor((i2+t)/f), t in [-r, r]; the
// weights of taps landing on the same low-resolution pixel are summed at load (exact up to
// fp32 summation order; zero padding maps to zero padding). The layer keeps its plain weight
// (a few KB) for the at:: path (PlainWeights() holds the fused one, under name + "/upsampled").
std::vector<int> UpsampledConvs(const Layers& layers, const std::vector<std::vector<int>>& readers) {
  const int n = static_cast<int>(layers.size());
  std::vector<int> upsampled_conv(n, 0);
  for (int i = 0; i < n; ++i) {
    const Layer& u = *layers[i];
    if (u.op != Op::kUpsample || u.factor < 2 || readers[i].size() != 1) continue;
    const int j = readers[i][0];
    const Layer& c = *layers[j];
    const bool adds = std::any_of(readers[j].begin(), readers[j].end(), [&](int r) { return layers[r]->op == Op::kAdd; });
    if (c.op == Op::kConv && c.stride == 1 && c.kernel % 2 == 1 && (c.same || c.kernel == 1) && c.inputs.size() == 1 &&
        !adds) {
      upsampled_conv[j] = u.factor;
    }
  }
  return upsampled_conv;
}

Fusions FusionsOf(const Layers& layers) {
  const int n = static_cast<int>(layers.size());
  Fusions fu;
  fu.readers.resize(n);
  for (int i = 0; i < n; ++i) {
    for (int k : layers[i]->inputs) fu.readers[k].push_back(i);
  }
  // In bf16 the two convolutions nearest the output stay fp32: 0.7-14% of ESRGAN's multiply-adds,
  // and the output's error from fp32 falls from 1.03-1.25 to 0.52-0.70 levels (0..255; a PyTorch
  // emulation on the peer benchmark's face crop), under the catalogue's 1.0.
  int tail = 0;
  fu.fp32_tail.assign(n, false);
  for (int i = n - 1; i >= 0 && tail < 2; --i) {
    if (layers[i]->op == Op::kConv) fu.fp32_tail[i] = ++tail > 0;
  }
  // A conv whose only reader is an Activation(relu) takes the ReLU as its post-op.
  fu.relu_after.assign(n, false);
  for (int i = 0; i < n; ++i) {
    const Layer& l = *layers[i];
    fu.relu_after[i] =
        l.op == Op::kConv && !l.relu && fu.readers[i].size() == 1 && layers[fu.readers[i][0]]->op == Op::kRelu;
  }
  fu.upsampled_conv = UpsampledConvs(layers, fu.readers);
  return fu;
}

// The OIHW weight w (kernel x kernel) of a conv after an upsample by f, as the low-resolution
// conv's (UpsampledConvs): f*f times the output channels, taps summed per low-resolution pixel.
at::Tensor FusedUpsampledWeight(const at::Tensor& w, int64_t f, int64_t kernel) {
  const int64_t r = (kernel - 1) / 2, reach = (r + f - 1) / f, k = 2 * reach + 1;
  const int64_t o = w.size(0);
  at::Tensor fused = at::zeros({f * f * o, w.size(1), k, k}, w.options());
  auto floor_div = [](int64_t a, int64_t d) { return a >= 0 ? a / d : -((-a + d - 1) / d); };
  for (int64_t i2 = 0; i2 < f; ++i2) {
    for (int64_t j2 = 0; j2 < f; ++j2) {
      for (int64_t ky = 0; ky < kernel; ++ky) {
        for (int64_t kx = 0; kx < kernel; ++kx) {
          const int64_t dy = floor_div(i2 + ky - r, f) + reach, dx = floor_div(j2 + kx - r, f) + reach;
          fused.slice(0, (i2 * f + j2) * o, (i2 * f + j2 + 1) * o).select(2, dy).select(2, dx) +=
              w.select(2, ky).select(2, kx);
        }
      }
    }
  }
  return fused;
}

// Conv layer i fused with the upsample it reads (UpsampledConvs); returns its value. The
// program's own bias copy is counted in fused_bytes.
int AddUpsampledConv(onednn::Program::Builder& b, const Layer& l, int i, int in, const Fusions& fu,
                     uint64_t& fused_bytes) {
  const int64_t f = fu.upsampled_conv[i], r = (l.kernel - 1) / 2, reach = (r + f - 1) / f, k = 2 * reach + 1;
  at::Tensor fused = FusedUpsampledWeight(l.weight, f, l.kernel);  // l.weight: OIHW (a view)
  const at::Tensor fused_bias = l.bias.defined() ? l.bias.repeat({f * f}) : at::Tensor();
  if (fused_bias.defined()) fused_bytes += fused_bias.nbytes();  // held by the program
  onednn::ConvSpec c{.name = l.name + "/upsampled", .weight = std::move(fused),
                     .bias = fused_bias, .stride = 1,
                     .padding = k > 1 ? onednn::Padding::kSame : onednn::Padding::kValid,
                     .act = l.relu || fu.relu_after[i] ? onednn::Activation::kRelu : onednn::Activation::kNone,
                     .fp32 = fu.fp32_tail[i]};
  return b.DepthToSpace(b.Conv(in, std::move(c)), static_cast<int>(f));
}

// Conv layer i; returns its value. The spec takes the layer's weight, the only reference: each
// plain weight is freed once packed (Build). conv + other -> one conv that adds `other` in its
// buffer, when the Add is the conv's only reader and the last of `other`'s (and nothing reads
// `other` in between); that Add's value is then the conv's.
int AddConv(onednn::Program::Builder& b, Layers& layers, int i, int in, const Fusions& fu, int output_layer,
            std::vector<int>& value) {
  const Layer& l = *layers[i];
  onednn::ConvSpec c{.name = l.name, .weight = std::move(layers[i]->weight), .bias = l.bias, .stride = l.stride,
                     .padding = l.same && l.kernel > 1 ? onednn::Padding::kSame : onednn::Padding::kValid,
                     .act = l.relu || fu.relu_after[i] ? onednn::Activation::kRelu : onednn::Activation::kNone,
                     .fp32 = fu.fp32_tail[i]};
  int add = -1;
  const std::vector<std::vector<int>>& readers = fu.readers;
  if (!l.relu && readers[i].size() == 1 && i != output_layer) {
    const int j = readers[i][0];
    const Layer& a = *layers[j];
    const int other = a.inputs.size() == 2 ? (a.inputs[0] == i ? a.inputs[1] : a.inputs[0]) : -1;
    if (a.op == Op::kAdd && other >= 0 && other != i && other < i && layers[other]->op != Op::kInput &&
        other != output_layer &&
        std::all_of(readers[other].begin(), readers[other].end(), [&](int r) { return r < i || r == j; })) {
      c.sum = value[other];
      add = j;
    }
  }
  value[i] = b.Conv(in, std::move(c));
  if (add >= 0) value[add] = value[i];
  return value[i];
}

}  // namespace

absl::Status KerasModel::Compile(bool bf16) {
  const int n = static_cast<int>(layers_.size());
  for (const auto& l : layers_) {
    if (l->op == Op::kMultiplyBeta || l->op == Op::kPixelShuffle) {
      return absl::UnimplementedError(absl::StrCat(origin_, ": layer '", l->name, "' has no oneDNN form"));
    }
  }
  const Fusions fu = FusionsOf(layers_);
  const std::vector<std::vector<int>>& readers = fu.readers;
  std::vector<int> value(n, -1);
  std::vector<bool> keep_weight(n, false);
  onednn::Program::Builder b;
  b.SetPrecision(onednn::PrecisionFor(CatalogueName(origin_), bf16 ? onednn::Precision::kBf16 : onednn::Precision::kF32));
  for (int i = 0; i < n; ++i) {
    const Layer& l = *layers_[i];
    std::vector<int> in;
    for (int k : l.inputs) in.push_back(value[k]);
    switch (l.op) {
      case Op::kInput: value[i] = b.input(); break;
      case Op::kConv:
        if (fu.upsampled_conv[i] > 0) {
          keep_weight[i] = true;
          value[i] = AddUpsampledConv(b, l, i, in[0], fu, fused_bytes_);
        } else {
          AddConv(b, layers_, i, in[0], fu, output_layer_, value);
        }
        break;
      case Op::kRelu: value[i] = fu.relu_after[l.inputs[0]] ? in[0] : b.Relu(in[0]); break;
      case Op::kConcat: value[i] = b.Concat(in); break;
      case Op::kAdd:
        if (value[i] < 0) value[i] = b.Add(in);
        break;
      case Op::kUpsample:
        value[i] = readers[i].size() == 1 && fu.upsampled_conv[readers[i][0]] > 0 ? in[0] : b.Upsample(in[0], l.factor);
        break;
      default: return absl::UnimplementedError(absl::StrCat(origin_, ": layer '", l.name, "' has no oneDNN form"));
    }
  }
  b.MarkOutput(value[output_layer_]);
  b.AllowPadding();  // ESRGAN's few-channel convs run faster padded (program.h)
  ASSIGN_OR_RETURN(program_, std::move(b).Build(input_channels_, 64, 64));
  for (int i = 0; i < n; ++i) {  // the packed copies are the resident ones
    if (!keep_weight[i]) layers_[i]->weight = at::Tensor();
  }
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> KerasModel::Forward(const at::Tensor& x) const {
  if (!x.defined() || x.dim() != 4 || x.size(1) != input_channels_ || x.scalar_type() != at::kFloat) {
    return absl::InvalidArgumentError(absl::StrCat(origin_, ": input must be [N,", input_channels_, ",H,W] float32"));
  }
  if (program_ && onednn::Usable(x)) {
    try {
      return program_->Run(x)[0].contiguous();
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(origin_, ": oneDNN forward failed: ", ExceptionText(e)));
    }
  }
  std::vector<at::Tensor> values(layers_.size());
  size_t i = 0;
  try {
    PlainWeights plain;  // the packed weights, unpacked for this call (a bf16 copy's autocast)
    if (program_) {
      for (auto& [name, t] : program_->PlainWeights()) plain.emplace(name, t.to(x.device()));
    }
    for (; i < layers_.size(); ++i) {
      std::vector<at::Tensor> in;
      for (int k : layers_[i]->inputs) in.push_back(values[k]);
      values[i] = RunLayer(*layers_[i], in, x, plain);
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
    if (!device.is_cpu() && program_) {  // the plain weights back, for the at:: path there
      for (auto& [name, t] : program_->PlainWeights()) {
        for (auto& l : layers_) {
          if (l->name == name) l->weight = t;
        }
      }
      program_.reset();
    }
    for (auto& l : layers_) {
      if (l->weight.defined()) l->weight = move(l->weight);
      if (l->bias.defined()) l->bias = move(l->bias);
    }
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(origin_, ": copy to ", device.str(), " failed: ", ExceptionText(e)));
  }
}

bool KerasModel::bf16() const { return program_ != nullptr && program_->precision() == onednn::Precision::kBf16; }

uint64_t KerasModel::resident_bytes() const {
  uint64_t bytes = program_ ? program_->PackedBytes() + fused_bytes_ : 0;
  for (const auto& l : layers_) {
    if (l->weight.defined()) bytes += l->weight.nbytes();
    if (l->bias.defined()) bytes += l->bias.nbytes();
  }
  return bytes;
}

}  // namespace fusion::keras
