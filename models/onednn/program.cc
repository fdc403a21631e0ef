// onednn::Program (program.h): plans per input shape, weights packed once, one arena per run.
#include "models/onednn/program.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <cstdlib>
#include <string_view>
#include <list>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "models/common/torch_autocast.h"

namespace fusion::onednn {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;
using Dims = memory::dims;
constexpr auto kF32 = memory::data_type::f32;
constexpr auto kBf16 = memory::data_type::bf16;

dnnl::engine& Engine() {
  static dnnl::engine engine = (CapIsa(), dnnl::engine(dnnl::engine::kind::cpu, 0));
  return engine;
}

// Output side and (before, after) padding of one spatial dimension.
struct Geometry {
  int64_t out, before, after;
};

Geometry ConvGeometry(int64_t in, int k, int s, Padding padding, int pad) {
  switch (padding) {
    case Padding::kValid: return {(in - k) / s + 1, 0, 0};
    case Padding::kExplicit: return {(in + 2 * pad - k) / s + 1, pad, pad};
    case Padding::kSame: break;
  }
  const int64_t out = (in + s - 1) / s, total = std::max<int64_t>((out - 1) * s + k - in, 0);
  return {out, total / 2, total - total / 2};
}

Geometry PoolGeometry(int64_t in, const PoolSpec& p) {
  if (p.same) return ConvGeometry(in, p.k, p.stride, Padding::kSame, 0);
  if (!p.ceil_mode) return {(in - p.k) / p.stride + 1, 0, 0};
  int64_t out = (in - p.k + p.stride - 1) / p.stride + 1;
  if ((out - 1) * p.stride >= in) --out;  // the last window starts inside the input
  return {out, 0, std::max<int64_t>(0, (out - 1) * p.stride + p.k - in)};
}

// The plain layouts oneDNN's blocked formats are compared with (ResidualDown keeps o's).
constexpr Tag kLayouts[] = {Tag::nChw16c, Tag::nChw8c, Tag::nchw, Tag::nhwc};

Tag LayoutOf(const memory::desc& md) {
  for (Tag t : kLayouts) {
    if (md == memory::desc(md.dims(), md.data_type(), t)) return t;
  }
  throw std::runtime_error("onednn::Program: an activation in an unexpected layout");
}

// Element offset of (n,c,h,w) in a 4-D layout with at most one inner block, on channels.
struct Indexer {
  explicit Indexer(const memory::desc& md) {
    const auto& b = md.data.format_desc.blocking;
    for (int i = 0; i < 4; ++i) st[i] = b.strides[i];
    blk = b.inner_nblks == 1 ? b.inner_blks[0] : 1;
    off0 = md.data.offset0;
  }
  int64_t operator()(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return off0 + n * st[0] + (c / blk) * st[1] + h * st[2] + w * st[3] + c % blk;
  }
  int64_t st[4];
  int64_t blk, off0;
};

// The packed bytes a weight may take without AllowPadding: its plain bytes and 1/16 more.
size_t PaddingAllowance(size_t plain) { return plain + plain / 16; }

// A plan's key: the input's sizes, its layout (1: channels-last) and the caller's intra-op
// thread count. oneDNN (OpenMP build) fixes a primitive's thread team when it is created
// (jcp.nthr = omp_get_max_threads() of the creating thread), not when it runs, so a plan made
// at 2 threads runs on 2 threads even after at::set_num_threads(1). at::get_num_threads()
// also brings this thread's OpenMP setting in line with LibTorch's (lazy init), so the
// primitives made for the key see exactly that many threads.
Dims PlanKey(at::IntArrayRef sizes, bool nhwc) {
  Dims key(sizes.begin(), sizes.end());
  key.push_back(nhwc ? 1 : 0);
  key.push_back(at::get_num_threads());
  return key;
}

}  // namespace

bool Available() { return true; }

bool Usable(const at::Tensor& x) {
  return x.defined() && x.is_cpu() && x.layout() == at::kStrided && x.scalar_type() == at::kFloat &&
         x.dim() == 4 && !torch_compat::CpuAutocast();
}

bool Enabled() {
  const char* v = std::getenv("FUSION_ONEDNN");
  return v == nullptr || std::string_view(v) != "0";
}

bool CapIsa() {
  static const bool capped = [] {
    if (std::getenv("ONEDNN_MAX_CPU_ISA") != nullptr || std::getenv("DNNL_MAX_CPU_ISA") != nullptr) return false;
    return dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx512_core_bf16) == dnnl::status::success;
  }();
  return capped;
}

bool Bf16Native() {
  CapIsa();
  const unsigned isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  return (isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16;
}

bool AmxNative() {
  CapIsa();
  const unsigned isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  return (isa & dnnl_cpu_isa_avx512_core_amx) == dnnl_cpu_isa_avx512_core_amx;
}

namespace {
thread_local bool fp32_only = false;
}  // namespace

Fp32Scope::Fp32Scope() : was_(fp32_only) { fp32_only = true; }
Fp32Scope::~Fp32Scope() { fp32_only = was_; }

Precision PrecisionFor(std::string_view net, Precision fallback) {
  if (fp32_only) return Precision::kF32;
  const char* v = std::getenv("FUSION_ONEDNN_PRECISION");
  Precision p = fallback;
  if (v != nullptr) {
    // "bf16" / "fp32" for every net, or "name=bf16,name=fp32" (a bare value applies to the rest).
    std::string_view rest(v);
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      std::string_view value = item;
      const size_t eq = item.find('=');
      if (eq != std::string_view::npos) {
        if (item.substr(0, eq) != net) continue;
        value = item.substr(eq + 1);
      }
      if (value == "bf16") p = Precision::kBf16;
      if (value == "fp32") p = Precision::kF32;
      if (eq != std::string_view::npos) break;  // the net's own entry wins over a bare value
    }
  }
  return p == Precision::kBf16 && !Bf16Native() ? Precision::kF32 : p;
}

enum class Kind { kConv, kPool, kRelu, kResidualDown, kConcat, kAdd, kUpsample, kNormalize, kDepthToSpace };

struct Program::Builder::Op {
  Kind kind;
  std::vector<int> in;  // values read; a conv's sum is in[1]
  ConvSpec conv;
  PoolSpec pool;
  bool f32 = false;   // a bf16 program's conv kept in fp32 (oneDNN 2.6 has no bf16 JIT kernel for it)
  at::Tensor packed;  // the weight in packed_md (after Build)
  memory::desc packed_md, plain_md, source_md;  // plain: dense OIHW (goihw); source: as given
  int factor = 1;     // kUpsample
  at::Tensor mean, divisor;  // kNormalize: [1,C,1,1], [1,1,1,1]
};

using Op = Program::Builder::Op;

int Program::Builder::Push(Op op) {
  ops_.push_back(std::make_shared<Op>(std::move(op)));
  return static_cast<int>(ops_.size());
}

int Program::Builder::Conv(int x, ConvSpec spec) {
  Op op{Kind::kConv, {x}, std::move(spec)};
  op.f32 = op.conv.fp32;
  if (op.conv.sum >= 0) op.in.push_back(op.conv.sum);
  return Push(std::move(op));
}
int Program::Builder::Pool(int x, PoolSpec spec) { return Push(Op{Kind::kPool, {x}, {}, spec}); }
int Program::Builder::Relu(int x) { return Push(Op{Kind::kRelu, {x}}); }
int Program::Builder::Normalize(int x, at::Tensor mean, float divisor) {
  Op op{Kind::kNormalize, {x}};
  op.mean = mean.to(at::kFloat).contiguous().view({1, -1, 1, 1});
  op.divisor = at::full({1, 1, 1, 1}, divisor);
  return Push(std::move(op));
}
int Program::Builder::ResidualDown(int o, int pooled) { return Push(Op{Kind::kResidualDown, {o, pooled}}); }
int Program::Builder::Concat(std::vector<int> xs) { return Push(Op{Kind::kConcat, std::move(xs)}); }
int Program::Builder::Add(std::vector<int> xs) { return Push(Op{Kind::kAdd, std::move(xs)}); }
int Program::Builder::Upsample(int x, int factor) {
  Op op{Kind::kUpsample, {x}};
  op.factor = factor;
  return Push(std::move(op));
}
int Program::Builder::DepthToSpace(int x, int factor) {
  Op op{Kind::kDepthToSpace, {x}};
  op.factor = factor;
  return Push(std::move(op));
}
void Program::Builder::MarkOutput(int v) { outputs_.push_back(v); }

// Where an argument's memory comes from at run time.
struct Arg {
  enum Src { kValue, kConst, kTemp, kScratch, kRuntime } src;
  int arg;                 // DNNL_ARG_*
  int index = 0;           // kValue: value id; kTemp: temp id
  const void* data = nullptr;  // kConst
  memory::desc md;
};

struct Step {
  dnnl::primitive prim;
  std::vector<Arg> args;
  bool residual_down = false;  // custom: args = {o, pooled, out}
  int depth_to_space = 0;      // custom, this factor: args = {in, out}
  int threads = 1;             // the OpenMP team it was made for and runs on
};

struct Plan {
  std::vector<memory::desc> value_md;  // per value; [0] = the input
  std::vector<int64_t> value_offset;   // arena offset (-1: the input)
  std::vector<memory::desc> temp_md;
  std::vector<int64_t> temp_offset;
  std::vector<Step> steps;
  std::vector<std::pair<dnnl::reorder, memory::desc>> out_reorders;  // value md -> nchw
  std::vector<int> out_threads;
  int threads = 1;  // the caller's (the key's)
  int64_t scratch_offset = 0, arena_bytes = 0;
  std::vector<std::string> impls;
};

// Small steps on one thread: each oneDNN primitive is an OpenMP parallel region with a
// barrier, and on a shared 2-core machine the second thread's wake-up (and its wait for a
// core) costs more than a small layer's work. A step under this many
// multiply-adds (convolutions) or 32x this many elements (other steps) is made and run with a
// team of one (oneDNN then calls it inline, no parallel region): 4M MACs, ~0.1 ms on one core.
// FUSION_ONEDNN_ONE_THREAD_BELOW sets it (0: every step on the caller's team).
int64_t OneThreadBelow() {
  static const int64_t v = [] {
    const char* e = std::getenv("FUSION_ONEDNN_ONE_THREAD_BELOW");
    return e != nullptr && *e != '\0' ? std::strtoll(e, nullptr, 10) : int64_t{1} << 22;
  }();
  return v;
}

// This thread's OpenMP team size while it lives (oneDNN reads omp_get_max_threads() when a
// primitive is made and when one without a fixed team runs); the previous size after.
class TeamSize {
 public:
  explicit TeamSize(int n) : was_(omp_get_max_threads()) { Set(n); }
  ~TeamSize() { omp_set_num_threads(was_); }
  void Set(int n) {
    if (n != now_) omp_set_num_threads(n);
    now_ = n;
  }

 private:
  const int was_;
  int now_ = -1;
};

int TeamFor(int threads, int64_t work) { return threads > 1 && work < OneThreadBelow() ? 1 : threads; }

// MakePlan at Build: bf16 conv ops[index] has only oneDNN's reference kernel; Build keeps it fp32.
struct KeepF32 {
  size_t index;
};

struct Program::Impl {
  std::vector<std::shared_ptr<Op>> ops;
  std::vector<int> outputs;
  int channels = 0;
  bool allow_padding = false;
  memory::data_type dt = kF32;  // activations and weights (Precision)
  std::string described;

  mutable std::mutex mu;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const Plan>> plans;
  mutable std::list<std::vector<int64_t>> order;  // oldest first

  std::shared_ptr<const Plan> MakePlan(const Dims& input, bool any_weights) const;
  std::shared_ptr<const Plan> PlanFor(const Dims& input) const;

 private:
  class PlanMaker;  // MakePlan's steps
};

namespace {

dnnl::primitive_attr UserScratch() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// Lays buffers out in one arena: a buffer lives from its first definition to its last use;
// buffers whose lives do not overlap may share bytes. Returns the arena size.
int64_t LayOut(const std::vector<std::pair<int, int>>& life, const std::vector<int64_t>& bytes,
               std::vector<int64_t>& offset) {
  struct Live { int64_t begin, end; int last; };
  std::vector<Live> live;
  int64_t top = 0;
  std::vector<size_t> order(life.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return life[a].first < life[b].first; });
  offset.assign(life.size(), 0);
  for (size_t i : order) {
    const int64_t size = (bytes[i] + 63) / 64 * 64;
    live.erase(std::remove_if(live.begin(), live.end(), [&](const Live& l) { return l.last < life[i].first; }),
               live.end());
    std::sort(live.begin(), live.end(), [](const Live& a, const Live& b) { return a.begin < b.begin; });
    int64_t at = 0;
    for (const Live& l : live) {
      if (l.begin - at >= size) break;
      at = std::max(at, l.end);
    }
    offset[i] = at;
    live.push_back({at, at + size, life[i].second});
    top = std::max(top, at + size);
  }
  return top;
}

// The post-ops a conv carries: the per-channel affine (mul, add), the in-place sum, the activation.
dnnl::post_ops ConvPostOps(const ConvSpec& c, const memory::desc& cmd) {
  dnnl::post_ops po;
  const bool affine = c.scale.defined() || c.affine_arg >= 0;
  if (affine) {
    po.append_binary(dnnl::algorithm::binary_mul, cmd);
    po.append_binary(dnnl::algorithm::binary_add, cmd);
  }
  if (c.sum >= 0) po.append_sum(1.f);
  if (c.act == Activation::kRelu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  if (c.act == Activation::kLeakyRelu) po.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, c.alpha, 0.f);
  if (c.act == Activation::kClip) po.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, 0.f, c.alpha);
  return po;
}

bool IsRef(std::string_view impl) { return impl.substr(0, 4) == "ref:"; }

// One conv's descriptors, as MakePlan derives them from the op and its source.
struct ConvDescs {
  memory::data_type dt;        // this conv's (a bf16 program's fp32 conv: f32)
  Dims sd;                     // the source's dims
  Geometry gh, gw;
  memory::desc wmd, bmd, dst;  // weights (any or packed), bias (or none), destination
  memory::desc cmd;            // the affine post-ops' per-channel operand
  dnnl::primitive_attr attr;
  int team;                    // the OpenMP team its steps are made for and run on
};

// A conv's primitive and whether its weights are reordered per run from the packed layout.
struct ConvChoice {
  dnnl::convolution_forward::primitive_desc pd;
  bool repack = false;
};

}  // namespace

// Builds one plan (MakePlan): its steps op by op, then the arena's layout and the outputs'
// reorders. Lives for one MakePlan; its TeamSize restores the caller's OpenMP team after.
class Program::Impl::PlanMaker {
 public:
  PlanMaker(const Impl& impl, const Dims& key, bool any_weights);
  std::shared_ptr<const Plan> Make();

 private:
  void AddOp(size_t i);
  // Each appends ops[i]'s steps and defines value v = i + 1; AddConv returns its steps' team.
  int AddConv(size_t i, const memory::desc& src);
  void AddPool(const Op& op, int v, const memory::desc& src);
  void AddNormalize(const Op& op, int v, const memory::desc& src);
  void AddRelu(const Op& op, int v, const memory::desc& src);
  void AddJoin(const Op& op, int v);  // kConcat, kAdd
  void AddUpsample(const Op& op, int v, const memory::desc& src);
  void AddDepthToSpace(const Op& op, int v, const memory::desc& src);
  void AddResidualDown(const Op& op, int v, const memory::desc& src);

  ConvDescs DescribeConv(const Op& op, int v, const memory::desc& src);
  ConvChoice ChooseConv(size_t i, const Op& op, const ConvDescs& cd) const;
  int AddTemp(int v, const memory::desc& md);  // a temp that lives during step v; its index
  Arg ConvSource(const Op& op, int v, const memory::desc& src, const memory::desc& want);
  void AddConvStep(const Op& op, int v, const ConvDescs& cd, const dnnl::convolution_forward::primitive_desc& pd,
                   const Arg& src_arg, int weight_temp);
  template <typename Pd>
  void Note(const Pd& pd) {
    scratch_ = std::max<int64_t>(scratch_, pd.scratchpad_desc().get_size());
    p_.impls.push_back(pd.impl_info_str());
  }
  void LayOutArena();
  void AddOutputReorders();

  const Impl& impl_;
  const bool any_weights_;
  std::shared_ptr<Plan> plan_ = std::make_shared<Plan>();
  Plan& p_ = *plan_;
  const size_t nv_;                // values: the input and one per op
  std::vector<int> buffer_of_;     // values sharing a buffer (a conv summed in place)
  std::vector<std::pair<int, int>> temp_life_;
  int64_t scratch_ = 0;
  TeamSize team_;
};

Program::Impl::PlanMaker::PlanMaker(const Impl& impl, const Dims& key, bool any_weights)
    : impl_(impl), any_weights_(any_weights), nv_(impl.ops.size() + 1), team_(static_cast<int>(key[5])) {
  p_.value_md.resize(nv_);
  const Dims input(key.begin(), key.begin() + 4);  // key[4]: 1 = channels-last input; key[5]: threads
  p_.value_md[0] = memory::desc(input, kF32, key[4] ? Tag::nhwc : Tag::nchw);
  buffer_of_.resize(nv_);
  for (size_t v = 0; v < nv_; ++v) buffer_of_[v] = static_cast<int>(v);
  p_.threads = static_cast<int>(key[5]);
}

std::shared_ptr<const Plan> Program::Impl::PlanMaker::Make() {
  for (size_t i = 0; i < impl_.ops.size(); ++i) AddOp(i);
  LayOutArena();
  AddOutputReorders();
  return plan_;
}

void Program::Impl::PlanMaker::AddOp(size_t i) {
  const Op& op = *impl_.ops[i];
  const int v = static_cast<int>(i + 1);
  const memory::desc& src = p_.value_md[op.in[0]];
  const Dims sd = src.dims();
  const size_t first_step = p_.steps.size();
  int op_team = TeamFor(p_.threads, 32 * (sd[0] * sd[1] * sd[2] * sd[3]));
  team_.Set(op_team);
  switch (op.kind) {
    case Kind::kConv: op_team = AddConv(i, src); break;
    case Kind::kPool: AddPool(op, v, src); break;
    case Kind::kNormalize: AddNormalize(op, v, src); break;
    case Kind::kRelu: AddRelu(op, v, src); break;
    case Kind::kConcat:
    case Kind::kAdd: AddJoin(op, v); break;
    case Kind::kUpsample: AddUpsample(op, v, src); break;
    case Kind::kDepthToSpace: AddDepthToSpace(op, v, src); break;
    case Kind::kResidualDown: AddResidualDown(op, v, src); break;
  }
  for (size_t k = first_step; k < p_.steps.size(); ++k) p_.steps[k].threads = op_team;
}

// Sets the conv's own team (by its multiply-adds) before any of its primitives is made.
ConvDescs Program::Impl::PlanMaker::DescribeConv(const Op& op, int v, const memory::desc& src) {
  const ConvSpec& c = op.conv;
  ConvDescs cd;
  cd.dt = impl_.dt == kBf16 && !op.f32 ? kBf16 : kF32;
  cd.sd = src.dims();
  const Dims& sd = cd.sd;
  const int64_t out_c = c.depthwise ? sd[1] : op.plain_md.dims()[0];
  const int k = static_cast<int>(op.plain_md.dims()[c.depthwise ? 3 : 2]);
  cd.gh = ConvGeometry(sd[2], k, c.stride, c.padding, c.pad);
  cd.gw = ConvGeometry(sd[3], k, c.stride, c.padding, c.pad);
  const Dims dd = {sd[0], out_c, cd.gh.out, cd.gw.out};
  cd.team = TeamFor(p_.threads, dd[0] * dd[1] * dd[2] * dd[3] * k * k * (c.depthwise ? 1 : sd[1]));
  team_.Set(cd.team);
  cd.dst = memory::desc(dd, cd.dt, Tag::nhwc);
  if (c.sum >= 0) {
    cd.dst = p_.value_md[c.sum];
    if (cd.dst.dims() != dd) throw std::runtime_error(absl::StrCat("onednn::Program: conv '", c.name, "' sums a value of another shape"));
    buffer_of_[v] = buffer_of_[c.sum];
  }
  cd.wmd = any_weights_ ? memory::desc(op.plain_md.dims(), cd.dt, Tag::any) : op.packed_md;
  cd.bmd = c.bias.defined() ? memory::desc({out_c}, kF32, Tag::a) : memory::desc();
  cd.cmd = memory::desc({1, out_c, 1, 1}, kF32, Tag::nchw);
  cd.attr = UserScratch();
  cd.attr.set_post_ops(ConvPostOps(c, cd.cmd));
  return cd;
}

// The conv's primitive: packed weights, HWIO where the packing pads too much, or a per-run
// reorder of the weights where the packed layout has no JIT kernel at this shape. Throws
// KeepF32 for a bf16 conv with only the reference kernel (Build retries it in fp32).
ConvChoice Program::Impl::PlanMaker::ChooseConv(size_t i, const Op& op, const ConvDescs& cd) const {
  const ConvSpec& c = op.conv;
  const memory::data_type dt = cd.dt;
  const Dims& sd = cd.sd;
  const Geometry gh = cd.gh, gw = cd.gw;
  // Activations are NHWC: oneDNN 2.6's AVX-512 brgemm kernels want it, and take binary
  // post-ops only there (measured: nChw16c + binary post-ops falls to ref:any). Should a
  // JIT kernel refuse it anyway, the layout oneDNN wants, reordered into.
  const memory::desc nhwc(sd, dt, Tag::nhwc);
  memory::desc conv_src = nhwc;
  auto make = [&](const memory::desc& w) {
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      conv_src, w, cd.bmd, cd.dst, {c.stride, c.stride}, {gh.before, gw.before},
                                      {gh.after, gw.after});
    dnnl::convolution_forward::primitive_desc pd(d, cd.attr, Engine());
    if (conv_src == nhwc && IsRef(pd.impl_info_str())) {
      conv_src = memory::desc(sd, dt, Tag::any);
      dnnl::convolution_forward::desc any(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                          conv_src, w, cd.bmd, cd.dst, {c.stride, c.stride}, {gh.before, gw.before},
                                          {gh.after, gw.after});
      pd = dnnl::convolution_forward::primitive_desc(any, cd.attr, Engine());
      conv_src = pd.src_desc();
    }
    return pd;
  };
  ConvChoice ch;
  auto& pd = ch.pd;
  try {
    pd = make(cd.wmd);
    // bf16: padding is kept while the packed bytes stay within the fp32 parameters' (the
    // first convs' 3 input channels padded to the kernel's pairs; oneDNN 2.6's bf16 GEMM
    // convolution is 30x slower than its brgemm there).
    const size_t allowance = dt == kBf16 ? op.plain_md.get_size() : PaddingAllowance(op.plain_md.get_size());
    if (any_weights_ && !impl_.allow_padding && pd.weights_desc().get_size() > allowance && !c.depthwise) {
      // Padded well beyond the parameters (output channels below the vector width): HWIO
      // through oneDNN's JIT GEMM instead, when it has a kernel, so the packed bytes stay
      // the parameters'. A little padding is kept: brgemm blocks 512 output channels by 48
      // at 32x32 (528 rows, +3%), and its kernel is 1.7x the GEMM's speed there.
      const memory::desc hwio(op.plain_md.dims(), dt, Tag::hwio);
      try {
        dnnl::convolution_forward::primitive_desc alt = make(hwio);
        if (!IsRef(alt.impl_info_str())) pd = alt;
      } catch (const dnnl::error&) {
      }
    }
    ch.repack = !any_weights_ && IsRef(pd.impl_info_str());
  } catch (const dnnl::error&) {
    if (any_weights_ && dt == kBf16) throw KeepF32{i};
    ch.repack = true;
  }
  if (any_weights_ && dt == kBf16 && IsRef(pd.impl_info_str())) throw KeepF32{i};
  // oneDNN's brgemm kernels block the weights by shape (e.g. Acdb64a at 13x13, Acdb32a at
  // 32x32) and fall to ref:any (100-1000x slower) for another blocking: the layout this
  // shape's kernel wants, the packed weights reordered into it per run (AddConv).
  if (ch.repack) pd = make(memory::desc(op.plain_md.dims(), dt, Tag::any));
  return ch;
}

int Program::Impl::PlanMaker::AddTemp(int v, const memory::desc& md) {
  const int t = static_cast<int>(p_.temp_md.size());
  p_.temp_md.push_back(md);
  temp_life_.push_back({v, v});
  return t;
}

// The conv's source argument: the value itself, or a temp it is reordered into first.
Arg Program::Impl::PlanMaker::ConvSource(const Op& op, int v, const memory::desc& src, const memory::desc& want) {
  if (want == src) return {Arg::kValue, DNNL_ARG_SRC, op.in[0], nullptr, want};
  const int t = AddTemp(v, want);
  p_.steps.push_back({dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), src, Engine(), want)),
                      {{Arg::kValue, DNNL_ARG_FROM, op.in[0], nullptr, src},
                       {Arg::kTemp, DNNL_ARG_TO, t, nullptr, want}}});
  p_.impls.push_back("reorder");
  return {Arg::kTemp, DNNL_ARG_SRC, t, nullptr, want};
}

int Program::Impl::PlanMaker::AddConv(size_t i, const memory::desc& src) {
  const Op& op = *impl_.ops[i];
  const int v = static_cast<int>(i + 1);
  const ConvDescs cd = DescribeConv(op, v, src);
  const ConvChoice ch = ChooseConv(i, op, cd);
  const dnnl::convolution_forward::primitive_desc& pd = ch.pd;
  int weight_temp = -1;
  if (ch.repack) {
    weight_temp = AddTemp(v, pd.weights_desc());
    Step r{dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), op.packed_md, Engine(), pd.weights_desc())),
           {{Arg::kConst, DNNL_ARG_FROM, 0, op.packed.data_ptr(), op.packed_md},
            {Arg::kTemp, DNNL_ARG_TO, weight_temp, nullptr, pd.weights_desc()}}};
    p_.steps.push_back(std::move(r));
    p_.impls.push_back("reorder(weights)");
  }
  Note(pd);
  const Arg src_arg = ConvSource(op, v, src, pd.src_desc());
  p_.value_md[v] = pd.dst_desc();
  AddConvStep(op, v, cd, pd, src_arg, weight_temp);
  return cd.team;
}

void Program::Impl::PlanMaker::AddConvStep(const Op& op, int v, const ConvDescs& cd,
                                           const dnnl::convolution_forward::primitive_desc& pd, const Arg& src_arg,
                                           int weight_temp) {
  const ConvSpec& c = op.conv;
  Step s{dnnl::convolution_forward(pd), {}};
  s.args.push_back(src_arg);
  if (weight_temp >= 0) {
    s.args.push_back({Arg::kTemp, DNNL_ARG_WEIGHTS, weight_temp, nullptr, pd.weights_desc()});
  } else {
    s.args.push_back({Arg::kConst, DNNL_ARG_WEIGHTS, 0, any_weights_ ? nullptr : op.packed.data_ptr(), pd.weights_desc()});
  }
  if (c.bias.defined()) s.args.push_back({Arg::kConst, DNNL_ARG_BIAS, 0, c.bias.data_ptr(), cd.bmd});
  if (c.scale.defined()) {
    s.args.push_back({Arg::kConst, DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, 0, c.scale.data_ptr(), cd.cmd});
    s.args.push_back({Arg::kConst, DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1, 0, c.shift.data_ptr(), cd.cmd});
  } else if (c.affine_arg >= 0) {
    s.args.push_back({Arg::kRuntime, DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, c.affine_arg, nullptr, cd.cmd});
    s.args.push_back({Arg::kRuntime, DNNL_ARG_ATTR_MULTIPLE_POST_OP(1) | DNNL_ARG_SRC_1, c.affine_arg + 1, nullptr, cd.cmd});
  }
  s.args.push_back({Arg::kValue, DNNL_ARG_DST, v, nullptr, pd.dst_desc()});
  s.args.push_back({Arg::kScratch, DNNL_ARG_SCRATCHPAD, 0, nullptr, pd.scratchpad_desc()});
  p_.steps.push_back(std::move(s));
}

void Program::Impl::PlanMaker::AddPool(const Op& op, int v, const memory::desc& src) {
  const PoolSpec& ps = op.pool;
  const Dims sd = src.dims();
  const Geometry gh = PoolGeometry(sd[2], ps), gw = PoolGeometry(sd[3], ps);
  const memory::desc dst({sd[0], sd[1], gh.out, gw.out}, src.data_type(), Tag::nhwc);
  dnnl::pooling_forward::desc d(dnnl::prop_kind::forward_inference,
                                ps.max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding,
                                src, dst, {ps.stride, ps.stride}, {ps.k, ps.k}, {gh.before, gw.before},
                                {gh.after, gw.after});
  dnnl::pooling_forward::primitive_desc pd(d, UserScratch(), Engine());
  Note(pd);
  p_.value_md[v] = pd.dst_desc();
  p_.steps.push_back({dnnl::pooling_forward(pd),
                      {{Arg::kValue, DNNL_ARG_SRC, op.in[0], nullptr, pd.src_desc()},
                       {Arg::kValue, DNNL_ARG_DST, v, nullptr, pd.dst_desc()},
                       {Arg::kScratch, DNNL_ARG_SCRATCHPAD, 0, nullptr, pd.scratchpad_desc()}}});
}

// binary_sub then a binary_div post-op, NCHW or NHWC as the input comes (oneDNN 2.6 has a
// JIT kernel only for a destination in the source's layout; the next conv reorders).
void Program::Impl::PlanMaker::AddNormalize(const Op& op, int v, const memory::desc& src) {
  const Dims sd = src.dims();
  if (op.mean.size(1) != sd[1]) throw std::runtime_error("onednn::Program: Normalize's mean has another channel count");
  const memory::desc mmd({1, sd[1], 1, 1}, kF32, Tag::nchw), dmd({1, 1, 1, 1}, kF32, Tag::nchw);
  dnnl::post_ops po;
  po.append_binary(dnnl::algorithm::binary_div, dmd);
  dnnl::primitive_attr attr = UserScratch();
  attr.set_post_ops(po);
  dnnl::binary::desc d(dnnl::algorithm::binary_sub, src, mmd, src);
  dnnl::binary::primitive_desc pd(d, attr, Engine());
  Note(pd);
  p_.value_md[v] = pd.dst_desc();
  p_.steps.push_back({dnnl::binary(pd),
                      {{Arg::kValue, DNNL_ARG_SRC_0, op.in[0], nullptr, src},
                       {Arg::kConst, DNNL_ARG_SRC_1, 0, op.mean.data_ptr(), mmd},
                       {Arg::kConst, DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, 0, op.divisor.data_ptr(), dmd},
                       {Arg::kValue, DNNL_ARG_DST, v, nullptr, pd.dst_desc()},
                       {Arg::kScratch, DNNL_ARG_SCRATCHPAD, 0, nullptr, pd.scratchpad_desc()}}});
}

void Program::Impl::PlanMaker::AddRelu(const Op& op, int v, const memory::desc& src) {
  dnnl::eltwise_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_relu, src, 0.f, 0.f);
  dnnl::eltwise_forward::primitive_desc pd(d, UserScratch(), Engine());
  Note(pd);
  p_.value_md[v] = pd.dst_desc();
  p_.steps.push_back({dnnl::eltwise_forward(pd),
                      {{Arg::kValue, DNNL_ARG_SRC, op.in[0], nullptr, pd.src_desc()},
                       {Arg::kValue, DNNL_ARG_DST, v, nullptr, pd.dst_desc()},
                       {Arg::kScratch, DNNL_ARG_SCRATCHPAD, 0, nullptr, pd.scratchpad_desc()}}});
}

// kConcat (on channels) or kAdd of op.in, into an NHWC destination.
void Program::Impl::PlanMaker::AddJoin(const Op& op, int v) {
  std::vector<memory::desc> srcs;
  int64_t channels = 0;
  for (int r : op.in) {
    srcs.push_back(p_.value_md[r]);
    channels += p_.value_md[r].dims()[1];
  }
  Dims dd = p_.value_md[op.in[0]].dims();
  if (op.kind == Kind::kConcat) dd[1] = channels;
  const memory::desc dst(dd, srcs[0].data_type(), Tag::nhwc);
  Step s;
  if (op.kind == Kind::kConcat) {
    dnnl::concat::primitive_desc pd(dst, 1, srcs, Engine(), UserScratch());
    Note(pd);
    s.prim = dnnl::concat(pd);
    s.args.push_back({Arg::kScratch, DNNL_ARG_SCRATCHPAD, 0, nullptr, pd.scratchpad_desc()});
  } else {
    dnnl::sum::primitive_desc pd(dst, std::vector<float>(srcs.size(), 1.f), srcs, Engine(), UserScratch());
    Note(pd);
    s.prim = dnnl::sum(pd);
    s.args.push_back({Arg::kScratch, DNNL_ARG_SCRATCHPAD, 0, nullptr, pd.scratchpad_desc()});
  }
  for (size_t k = 0; k < op.in.size(); ++k) {
    s.args.push_back({Arg::kValue, static_cast<int>(DNNL_ARG_MULTIPLE_SRC + k), op.in[k], nullptr, srcs[k]});
  }
  p_.value_md[v] = dst;
  s.args.push_back({Arg::kValue, DNNL_ARG_DST, v, nullptr, dst});
  p_.steps.push_back(std::move(s));
}

void Program::Impl::PlanMaker::AddUpsample(const Op& op, int v, const memory::desc& src) {
  const Dims sd = src.dims();
  const memory::desc dst({sd[0], sd[1], sd[2] * op.factor, sd[3] * op.factor}, src.data_type(), Tag::nhwc);
  const float f = static_cast<float>(op.factor);
  dnnl::resampling_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::resampling_nearest,
                                   {f, f}, src, dst);
  dnnl::resampling_forward::primitive_desc pd(d, UserScratch(), Engine());
  Note(pd);
  p_.value_md[v] = dst;
  p_.steps.push_back({dnnl::resampling_forward(pd),
                      {{Arg::kValue, DNNL_ARG_SRC, op.in[0], nullptr, src},
                       {Arg::kValue, DNNL_ARG_DST, v, nullptr, dst},
                       {Arg::kScratch, DNNL_ARG_SCRATCHPAD, 0, nullptr, pd.scratchpad_desc()}}});
}

void Program::Impl::PlanMaker::AddDepthToSpace(const Op& op, int v, const memory::desc& src) {
  const Dims sd = src.dims();
  const int64_t f = op.factor;
  if (f < 1 || sd[1] % (f * f) != 0) throw std::runtime_error("onednn::Program: DepthToSpace of a channel count not divisible by s*s");
  if (src != memory::desc(sd, src.data_type(), Tag::nhwc)) throw std::runtime_error("onednn::Program: DepthToSpace wants an NHWC input");
  p_.value_md[v] = memory::desc({sd[0], sd[1] / (f * f), sd[2] * f, sd[3] * f}, src.data_type(), Tag::nhwc);
  Step s;
  s.depth_to_space = op.factor;
  s.args = {{Arg::kValue, 0, op.in[0], nullptr, src}, {Arg::kValue, 0, v, nullptr, p_.value_md[v]}};
  p_.steps.push_back(std::move(s));
  p_.impls.push_back("depth_to_space:native");
}

void Program::Impl::PlanMaker::AddResidualDown(const Op& op, int v, const memory::desc& src) {
  const Dims od = src.dims(), pdims = p_.value_md[op.in[1]].dims();
  if (od[1] < pdims[1] || od[2] > pdims[2] || od[3] > pdims[3]) {
    throw std::runtime_error("onednn::Program: ResidualDown shapes do not nest");
  }
  p_.value_md[v] = memory::desc({od[0], od[1], pdims[2], pdims[3]}, src.data_type(), LayoutOf(src));
  LayoutOf(p_.value_md[op.in[1]]);  // checks the layout is one Indexer reads
  Step s;
  s.residual_down = true;
  s.args = {{Arg::kValue, 0, op.in[0], nullptr, src},
            {Arg::kValue, 0, op.in[1], nullptr, p_.value_md[op.in[1]]},
            {Arg::kValue, 0, v, nullptr, p_.value_md[v]}};
  p_.steps.push_back(std::move(s));
  p_.impls.push_back("residual_down:native");
}

// Buffers: live from their first definition to their last read (outputs to the end); temps
// during their step. Sets the values' and temps' offsets, the scratchpad's and the arena size.
void Program::Impl::PlanMaker::LayOutArena() {
  std::vector<std::pair<int, int>> life;
  std::vector<int64_t> bytes;
  std::map<int, size_t> slot;  // buffer id -> index in life
  for (size_t v = 1; v < nv_; ++v) {
    const int b = buffer_of_[v];
    if (!slot.count(b)) {
      slot[b] = life.size();
      life.push_back({static_cast<int>(v), static_cast<int>(v)});
      bytes.push_back(static_cast<int64_t>(p_.value_md[b].get_size()));
    }
    life[slot[b]].second = std::max(life[slot[b]].second, static_cast<int>(v));
  }
  for (size_t i = 0; i < impl_.ops.size(); ++i) {
    for (int r : impl_.ops[i]->in) {
      if (r > 0) life[slot[buffer_of_[r]]].second = std::max(life[slot[buffer_of_[r]]].second, static_cast<int>(i + 1));
    }
  }
  for (int out : impl_.outputs) life[slot[buffer_of_[out]]].second = static_cast<int>(nv_);
  const size_t nbuf = life.size();
  for (size_t t = 0; t < p_.temp_md.size(); ++t) {
    life.push_back(temp_life_[t]);
    bytes.push_back(static_cast<int64_t>(p_.temp_md[t].get_size()));
  }
  std::vector<int64_t> offset;
  p_.scratch_offset = LayOut(life, bytes, offset);
  p_.arena_bytes = p_.scratch_offset + (scratch_ + 63) / 64 * 64;
  p_.value_offset.assign(nv_, -1);
  for (size_t v = 1; v < nv_; ++v) p_.value_offset[v] = offset[slot[buffer_of_[v]]];
  for (size_t t = 0; t < p_.temp_md.size(); ++t) p_.temp_offset.push_back(offset[nbuf + t]);
}

// Each output's reorder into plain NHWC fp32, made for (and run on) its own team.
void Program::Impl::PlanMaker::AddOutputReorders() {
  for (int out : impl_.outputs) {
    const memory::desc plain(p_.value_md[out].dims(), kF32, Tag::nhwc);
    const Dims od = plain.dims();
    p_.out_threads.push_back(TeamFor(p_.threads, 32 * od[0] * od[1] * od[2] * od[3]));
    team_.Set(p_.out_threads.back());
    p_.out_reorders.push_back(
        {dnnl::reorder(dnnl::reorder::primitive_desc(Engine(), p_.value_md[out], Engine(), plain)), plain});
  }
}

std::shared_ptr<const Plan> Program::Impl::MakePlan(const Dims& key, bool any_weights) const {
  return PlanMaker(*this, key, any_weights).Make();
}

std::shared_ptr<const Plan> Program::Impl::PlanFor(const Dims& input) const {
  std::lock_guard<std::mutex> lock(mu);
  auto it = plans.find(input);
  if (it != plans.end()) return it->second;
  std::shared_ptr<const Plan> plan = MakePlan(input, /*any_weights=*/false);
  if (plans.size() >= static_cast<size_t>(kMaxPlans)) {
    plans.erase(order.front());
    order.pop_front();
  }
  plans.emplace(input, plan);
  order.push_back(input);
  return plan;
}

absl::StatusOr<std::unique_ptr<Program>> Program::Builder::Build(int c, int h, int w) && {
  auto impl = std::make_unique<Program::Impl>();
  impl->channels = c;
  impl->outputs = outputs_;
  impl->allow_padding = allow_padding_;
  impl->dt = precision_ == Precision::kBf16 ? kBf16 : kF32;
  const int nv = static_cast<int>(ops_.size()) + 1;
  std::vector<int> last_read(nv, -1);
  for (size_t i = 0; i < ops_.size(); ++i) {
    for (int r : ops_[i]->in) {
      if (r < 0 || r > static_cast<int>(i)) return absl::InvalidArgumentError("onednn::Program: a value read before it is made");
      last_read[r] = static_cast<int>(i);
    }
  }
  for (int out : outputs_) {
    if (out <= 0 || out >= nv) return absl::InvalidArgumentError("onednn::Program: an output that is no op's value");
  }
  for (size_t i = 0; i < ops_.size(); ++i) {
    Op& op = *ops_[i];
    if (op.kind != Kind::kConv) continue;
    const ConvSpec& cs = op.conv;
    if (cs.sum == 0 || (cs.sum > 0 && (last_read[cs.sum] != static_cast<int>(i) ||
                                       std::count(outputs_.begin(), outputs_.end(), cs.sum)))) {
      return absl::InvalidArgumentError(absl::StrCat("onednn::Program: conv '", cs.name,
                                                     "' sums a value read later (or the input)"));
    }
    if (!cs.weight.defined() || cs.weight.dim() != 4 || cs.weight.scalar_type() != at::kFloat ||
        !cs.weight.is_cpu()) {
      return absl::InvalidArgumentError(absl::StrCat("onednn::Program: conv '", cs.name, "': weight is not OIHW fp32"));
    }
    const auto ws = cs.weight.sizes();
    const auto st = cs.weight.strides();
    op.plain_md = cs.depthwise ? memory::desc({ws[0], 1, 1, ws[2], ws[3]}, kF32, Tag::goihw)
                               : memory::desc({ws[0], ws[1], ws[2], ws[3]}, kF32, Tag::oihw);
    // Packed straight from the weight as given (e.g. a permuted view of the TF.js HWIO tensor).
    op.source_md = cs.depthwise ? memory::desc({ws[0], 1, 1, ws[2], ws[3]}, kF32, Dims{st[0], st[1], st[1], st[2], st[3]})
                                : memory::desc({ws[0], ws[1], ws[2], ws[3]}, kF32, Dims{st[0], st[1], st[2], st[3]});
  }
  impl->ops = std::move(ops_);
  try {
    // The layouts oneDNN picks at the usual shape; every later plan asks for exactly them.
    std::shared_ptr<const Plan> probe;
    while (!probe) {
      try {
        probe = impl->MakePlan(PlanKey({1, c, h, w}, false), /*any_weights=*/true);
      } catch (const KeepF32& k) {
        impl->ops[k.index]->f32 = true;
      }
    }
    dnnl::stream stream(Engine());
    size_t step = 0;  // conv ops and the steps with weights come in the same order
    for (auto& opp : impl->ops) {
      Op& op = *opp;
      if (op.kind != Kind::kConv) continue;
      while (step < probe->steps.size() &&
             std::none_of(probe->steps[step].args.begin(), probe->steps[step].args.end(),
                          [](const Arg& a) { return a.arg == DNNL_ARG_WEIGHTS; })) {
        ++step;
      }
      const Arg& wa = *std::find_if(probe->steps[step].args.begin(), probe->steps[step].args.end(),
                                    [](const Arg& a) { return a.arg == DNNL_ARG_WEIGHTS; });
      ++step;
      op.packed_md = wa.md;
      op.packed = at::empty({static_cast<int64_t>(op.packed_md.get_size())}, at::TensorOptions().dtype(at::kByte));
      memory from(op.source_md, Engine(), op.conv.weight.data_ptr());
      memory to(op.packed_md, Engine(), op.packed.data_ptr());
      dnnl::reorder(from, to).execute(stream, from, to);
      stream.wait();
      op.conv.weight = at::Tensor();  // the packed copy is the resident one (freed as we go when
                                      // the caller passed the only reference)
    }
    stream.wait();
    impl->described = absl::StrJoin(probe->impls, " ");
    impl->PlanFor(PlanKey({1, c, h, w}, false));
  } catch (const dnnl::error& e) {
    return absl::InvalidArgumentError(absl::StrCat("onednn::Program: ", e.what()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("onednn::Program: ", e.what()));
  }
  return std::unique_ptr<Program>(new Program(std::move(impl)));
}

Program::Program(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Program::~Program() = default;

namespace {

// A large arena is usually fresh memory (glibc and jemalloc map allocations of several MiB
// anew and return them at free): faulting it in 4-KiB pages cost SSD's 32-MiB arena ~8,000 page
// faults per run. Transparent huge pages for it, where the kernel offers them on request
// (THP "madvise"), fault it in 2-MiB pages. Advice only: nothing changes where the kernel says no.
void AdviseHugePages(char* base, int64_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;
  if (bytes < static_cast<int64_t>(2 * kHuge)) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(base) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(bytes)) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

// bf16 <-> fp32 (bf16 is the upper half of an IEEE float; round to nearest even, as oneDNN).
float Load(const char* base, bool bf16, int64_t i) {
  if (!bf16) return reinterpret_cast<const float*>(base)[i];
  const uint32_t bits = static_cast<uint32_t>(reinterpret_cast<const uint16_t*>(base)[i]) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
void Store(char* base, bool bf16, int64_t i, float v) {
  if (!bf16) {
    reinterpret_cast<float*>(base)[i] = v;
    return;
  }
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  reinterpret_cast<uint16_t*>(base)[i] = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

// relu(o' + p') (program.h), each of the three in fp32 or bf16 (a few KB: FaceRecognitionNet's
// shortcuts at 36x36 and smaller).
void RunResidualDown(const Step& s, const std::vector<char*>& ptr) {
  const memory::desc &om = s.args[0].md, &pm = s.args[1].md, &rm = s.args[2].md;
  const Indexer oi(om), pi(pm), ri(rm);
  const bool o16 = om.data_type() == kBf16, p16 = pm.data_type() == kBf16, r16 = rm.data_type() == kBf16;
  std::memset(ptr[2], 0, rm.get_size());
  const Dims od = om.dims(), pd = pm.dims(), rd = rm.dims();
  for (int64_t n = 0; n < rd[0]; ++n) {
    for (int64_t c = 0; c < rd[1]; ++c) {
      for (int64_t h = 0; h < rd[2]; ++h) {
        for (int64_t w = 0; w < rd[3]; ++w) {
          const float a = h < od[2] && w < od[3] ? Load(ptr[0], o16, oi(n, c, h, w)) : 0.f;
          const float b = c < pd[1] ? Load(ptr[1], p16, pi(n, c, h, w)) : 0.f;
          Store(ptr[2], r16, ri(n, c, h, w), std::max(a + b, 0.f));
        }
      }
    }
  }
}

// depthToSpace (DCR) between two NHWC buffers: each output pixel's C channels are one
// contiguous run of the input pixel's (i*s+j)-th group.
void RunDepthToSpace(const Step& s, const std::vector<char*>& ptr) {
  const memory::desc& im = s.args[0].md;
  const Dims d = im.dims();
  const int64_t f = s.depth_to_space, n = d[0], cc = d[1], h = d[2], w = d[3], c = cc / (f * f);
  const size_t elem = im.data_type() == kBf16 ? 2 : 4, run = static_cast<size_t>(c) * elem;
  const char* in = ptr[0];
  char* out = ptr[1];
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t i = 0; i < f; ++i) {
        char* row = out + (((b * h + y) * f + i) * w * f) * run;  // output row y*f+i
        for (int64_t x = 0; x < w; ++x) {
          const char* px = in + ((b * h + y) * w + x) * cc * elem + i * f * run;
          std::memcpy(row + x * f * run, px, f * run);  // the f groups (i, 0..f-1) are adjacent
        }
      }
    }
  }
}

}  // namespace

std::vector<at::Tensor> Program::Run(const at::Tensor& input, const std::vector<at::Tensor>& args_in) const {
  TORCH_CHECK(Usable(input), "onednn::Program: input must be a 4-D float32 CPU tensor, got ", input.sizes(), " ",
              input.scalar_type());
  TORCH_CHECK(input.size(1) == impl_->channels, "onednn::Program: input has ", input.size(1), " channels, not ",
              impl_->channels);
  // NCHW or channels-last (a Program's own output) as given; anything else made NCHW.
  const bool nhwc = !input.is_contiguous() && input.is_contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor x = nhwc ? input : input.contiguous();
  std::shared_ptr<const Plan> plan = impl_->PlanFor(PlanKey(x.sizes(), nhwc));
  const Plan& p = *plan;
  const at::Tensor arena = at::empty({std::max<int64_t>(p.arena_bytes, 1)}, x.options().dtype(at::kByte));
  char* base = static_cast<char*>(arena.data_ptr());
  AdviseHugePages(base, p.arena_bytes);
  dnnl::stream stream(Engine());
  std::unordered_map<int, memory> args;
  std::vector<char*> ptrs;
  TeamSize team(p.threads);
  for (const Step& s : p.steps) {
    team.Set(s.threads);
    args.clear();
    ptrs.clear();
    for (const Arg& a : s.args) {
      char* ptr = nullptr;
      switch (a.src) {
        case Arg::kValue:
          ptr = a.index == 0 ? static_cast<char*>(x.data_ptr()) : base + p.value_offset[a.index];
          break;
        case Arg::kConst: ptr = const_cast<char*>(static_cast<const char*>(a.data)); break;
        case Arg::kTemp: ptr = base + p.temp_offset[a.index]; break;
        case Arg::kScratch: ptr = base + p.scratch_offset; break;
        case Arg::kRuntime: {
          TORCH_CHECK(a.index < static_cast<int>(args_in.size()), "onednn::Program: Run lacks argument ", a.index);
          const at::Tensor& t = args_in[a.index];
          TORCH_CHECK(t.is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous() &&
                          static_cast<size_t>(t.nbytes()) == a.md.get_size(),
                      "onednn::Program: argument ", a.index, " is not a contiguous fp32 CPU tensor of ",
                      a.md.get_size() / 4, " values");
          ptr = static_cast<char*>(t.data_ptr());
          break;
        }
      }
      ptrs.push_back(ptr);
      if (!s.residual_down && s.depth_to_space == 0) args.emplace(a.arg, memory(a.md, Engine(), ptr));
    }
    if (s.residual_down) {
      RunResidualDown(s, ptrs);
    } else if (s.depth_to_space > 0) {
      RunDepthToSpace(s, ptrs);
    } else {
      s.prim.execute(stream, args);
    }
  }
  std::vector<at::Tensor> outs;
  for (size_t i = 0; i < impl_->outputs.size(); ++i) {
    const int v = impl_->outputs[i];
    const auto& [reorder, plain] = p.out_reorders[i];
    team.Set(p.out_threads[i]);
    const Dims d = plain.dims();
    at::Tensor out = at::empty({d[0], d[1], d[2], d[3]}, x.options().memory_format(at::MemoryFormat::ChannelsLast));
    memory from(p.value_md[v], Engine(), base + p.value_offset[v]);
    memory to(plain, Engine(), out.data_ptr());
    reorder.execute(stream, from, to);
    outs.push_back(std::move(out));
  }
  stream.wait();
  return outs;
}

std::vector<std::string> Program::packed_names() const {
  std::vector<std::string> names;
  for (const auto& op : impl_->ops) {
    if (op->kind == Kind::kConv) names.push_back(op->conv.name);
  }
  return names;
}

uint64_t Program::PackedBytes() const {
  uint64_t bytes = 0;
  for (const auto& op : impl_->ops) {
    if (op->packed.defined()) bytes += op->packed.nbytes();
  }
  return bytes;
}

std::vector<std::pair<std::string, at::Tensor>> Program::PlainWeights() const {
  std::vector<std::pair<std::string, at::Tensor>> out;
  dnnl::stream stream(Engine());
  for (const auto& op : impl_->ops) {
    if (!op->packed.defined()) continue;
    const Dims d = op->plain_md.dims();
    at::Tensor w = op->conv.depthwise ? at::empty({d[0], 1, d[3], d[4]}) : at::empty({d[0], d[1], d[2], d[3]});
    memory from(op->packed_md, Engine(), op->packed.data_ptr());
    memory to(op->plain_md, Engine(), w.data_ptr());
    dnnl::reorder(from, to).execute(stream, from, to);
    out.emplace_back(op->conv.name, std::move(w));
  }
  stream.wait();
  return out;
}

Precision Program::precision() const { return impl_->dt == kBf16 ? Precision::kBf16 : Precision::kF32; }

std::string Program::Describe() const { return impl_->described; }

std::string Program::Describe(at::IntArrayRef sizes) const {
  return absl::StrJoin(impl_->PlanFor(PlanKey(sizes, false))->impls, " ");
}

}  // namespace fusion::onednn
