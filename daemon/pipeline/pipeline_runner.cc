// The face-fusion pipeline as a JobRunner (pipeline_runner.h). No LibTorch in this TU: the
// stage computations are in stages.cc.
#include "pipeline/pipeline_runner.h"

#include <functional>
#include <future>

#include <opencv2/imgproc.hpp>

#include "models/common/exception_text.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "device/cpu_device_memory.h"
#include "image/image_header.h"
#include "models/blend/blend.h"
#include "pipeline/device_oom.h"
#include "pipeline/image_io.h"
#include "pipeline/job_options.h"
#include "pipeline/stages.h"

namespace fusion {
namespace {

// A stage's computation on one model copy; `cp` is asked between its faces/tiles/passes.
using StageFn = std::function<absl::Status(const ModelCopy& copy, int tile_px, const Checkpoint& cp)>;

// A stage body over one model: the device attempt runs inside the stage's scope on the
// device copy, the CPU fallback on a host copy inside a host scope (OomLadder). Exceptions become statuses;
// a device OOM (thrown, or swallowed by a network into an error status after the allocator
// refused) becomes DeviceOomError(); a cancellation stays CANCELLED.
class ModelBody final : public StageBody {
 public:
  ModelBody(const ModelStore& store, std::string stage, std::string model, StageFn fn, Checkpoint cp)
      : store_(store), stage_(std::move(stage)), model_(std::move(model)), fn_(std::move(fn)),
        cp_(std::move(cp)) {}

  absl::Status RunDevice(int tile_px, ScopeId scope) override {
    DeviceScope in_scope(scope);
    auto copy = store_.DeviceCopy(model_);
    if (!copy.ok()) return copy.status();
    return Guard(**copy, tile_px);
  }
  // The host copy is built outside any scope (its weights are the host tier's); the stage's
  // own allocations are charged to the host scope its host lease admitted.
  absl::Status RunCpu(int tile_px, ScopeId scope) override {
    auto copy = store_.HostCopy(model_);
    if (!copy.ok()) return copy.status();
    DeviceScope in_host_scope(scope);
    return Guard(**copy, tile_px);
  }

 private:
  absl::Status Guard(const ModelCopy& copy, int tile_px) {
    (void)IsDeviceOom(std::runtime_error(""));  // clears this thread's refusal flag
    absl::Status st;
    try {
      st = fn_(copy, tile_px, cp_);
    } catch (const std::exception& e) {
      if (IsDeviceOom(e)) return DeviceOomError(absl::StrCat("stage '", stage_, "': ", ExceptionText(e)));
      return absl::InternalError(absl::StrCat("stage '", stage_, "' (model '", model_, "'): ", ExceptionText(e)));
    }
    if (absl::IsCancelled(st)) return st;  // never mistaken for an OOM: the ladder ends at once
    // Networks turn LibTorch exceptions into INTERNAL; the allocator's flag tells an OOM apart.
    if (!st.ok() && (IsDeviceOom(std::runtime_error("")) ||
                     absl::StrContains(st.message(), "out of memory"))) {
      return DeviceOomError(absl::StrCat("stage '", stage_, "': ", st.message()));
    }
    return st;
  }

  const ModelStore& store_;
  const std::string stage_, model_;
  StageFn fn_;
  const Checkpoint cp_;
};

v1::StageMode ToProto(StageMode m) {
  switch (m) {
    case StageMode::kDevice: return v1::DEVICE;
    case StageMode::kTiled: return v1::TILED;
    case StageMode::kCpuFallback: return v1::CPU_FALLBACK;
    case StageMode::kHost: return v1::HOST;
  }
  return v1::STAGE_MODE_UNSPECIFIED;
}

std::vector<cv::Point2f> Points(const faceapi::Landmarks68& l) {
  std::vector<cv::Point2f> p;
  for (const faceapi::Point& q : l) p.emplace_back(q.x, q.y);
  return p;
}

}  // namespace

PipelineRunner::PipelineRunner(ModelStore* store, ResidencyManager* residency, DeviceMeter* meter,
                               FaultInjector* faults, Options options)
    : store_(store), residency_(residency), meter_(meter), faults_(faults),
      options_(std::move(options)), ladder_(residency, meter, faults, options_.ladder) {}

std::string PipelineRunner::EnhancerFor(const v1::JobOptions& o, uint32_t scale) const {
  if (!o.enhance_model().empty() && scale == o.enhance_scale()) return o.enhance_model();
  return scale == 4 ? options_.enhancer_x4 : options_.enhancer_x2;
}

absl::Status PipelineRunner::Validate(const v1::JobOptions& o) const {
  return ValidateJobOptions(o, store_->catalogue());
}

absl::Status PipelineRunner::CheckImages(const std::string& serialized, const std::string& source_image,
                                         const std::string& target_image) {
  v1::JobOptions o;
  if (!o.ParseFromString(serialized)) return absl::InvalidArgumentError("options: unparsable JobOptions");
  return ScreenJobImages(o, source_image, target_image, options_.max_pixels);
}

DetectSettings PipelineRunner::DetectSettingsFor(const v1::JobOptions& o) const {
  DetectSettings d;
  d.min_face_px = static_cast<int>(o.min_face_px() != 0 ? o.min_face_px() : options_.default_min_face_px);
  d.min_score = o.min_face_score() != 0 ? o.min_face_score() : options_.default_min_face_score;
  const uint32_t cap = o.max_side() != 0 ? o.max_side()
                       : o.low_vram()    ? options_.low_vram_detect_max_input
                                         : options_.detect_max_input;
  d.max_input = static_cast<int>(std::clamp<uint32_t>(cap / 32 * 32, 416, 1024));
  return d;
}

absl::StatusOr<std::vector<std::string>> PipelineRunner::StageModels(const std::string& serialized) {
  v1::JobOptions o;
  if (!o.ParseFromString(serialized)) return absl::InvalidArgumentError("options: unparsable JobOptions");
  if (absl::Status st = Validate(o); !st.ok()) return st;
  std::vector<std::string> models = {options_.detector, options_.landmarks, options_.encoder,
                                     options_.generator};
  if (o.enhance_scale() != 0) models.push_back(EnhancerFor(o, o.enhance_scale()));
  if (o.simple()) models.push_back(options_.blender);  // full blending is host code: no model
  models.push_back(options_.encoder);  // score
  if (o.upscale() != 0) models.push_back(EnhancerFor(o, o.upscale()));
  return models;
}

absl::StatusOr<jobs::JobRunner::Output> PipelineRunner::Run(const jobs::JobRecord& job,
                                                            const std::string& source_image,
                                                            const std::string& target_image,
                                                            Context& context) {
  v1::JobOptions o;
  if (!o.ParseFromString(job.options)) return absl::InvalidArgumentError("options: unparsable JobOptions");
  auto out = Swap(Owner{job.id, static_cast<uint32_t>(job.owner_uid)}, source_image, target_image, o, context);
  if (out.ok()) out->report.set_job_id(job.id);
  return out;
}

namespace {

// One job's run: its pictures, the stages' reports, the progress sink.
class Execution {
 public:
  // `plan`: the model of every model stage in run order (StageModels), for prefetch.
  Execution(const ModelStore& store, ResidencyManager& residency, OomLadder& ladder, const Owner& owner,
            jobs::JobRunner::Context& ctx, v1::JobResult& report, std::vector<std::string> plan)
      : store_(store), residency_(residency), ladder_(ladder), owner_(owner), ctx_(ctx), report_(report),
        plan_(std::move(plan)) {}
  ~Execution() {
    if (prefetch_.valid()) prefetch_.wait();
  }

  // A degradation that is not a stage's: reported in the result and as a job event.
  void Degrade(const std::string& d) {
    report_.add_degradations(d);
    ctx_.Degradation(d);
  }

  // Runs one model stage under the ladder. `input_pixels`: pixels the network sees at once.
  // `tile_halo_px`: context a tile reads on each side (StageSpec::tile_halo_px).
  absl::Status Stage(const std::string& name, const std::string& model, uint64_t input_pixels,
                     const std::string& bucket, float progress, StageFn fn, int max_tile_px = 256,
                     int min_tile_px = 64, int tile_halo_px = 0) {
    if (ctx_.Cancelled()) return absl::CancelledError(absl::StrCat("job cancelled before stage '", name, "'"));
    ctx_.StageStarted(name, progress);
    auto spec = store_.catalogue().Get(model);
    if (!spec.ok()) return spec.status();
    StageSpec stage{.name = name,
                    .model = model,
                    .tileable = (*spec)->tileable,
                    .working_bytes = std::max<uint64_t>(1, (*spec)->working_set_bytes_per_pixel * input_pixels),
                    .shape_bucket = bucket,
                    .input_pixels = input_pixels,
                    .max_tile_px = max_tile_px,
                    .min_tile_px = min_tile_px,
                    .tile_halo_px = tile_halo_px,
                    .cancelled = [this] { return ctx_.Cancelled(); },
                    // The job's stage text says what it waits for while it waits.
                    .waiting = [this, name, progress](const std::string& note) {
                      ctx_.StageStarted(note.empty() ? name : absl::StrCat(name, " (", note, ")"), progress);
                    }};
    // The prefetch of this stage's model (started while the previous stage ran) counts as
    // upload wait; then the next model comes up while this stage runs.
    const absl::Time wait_start = absl::Now();
    if (prefetch_.valid()) prefetch_.wait();
    const double prefetch_wait_ms = absl::ToDoubleMilliseconds(absl::Now() - wait_start);
    while (next_ < plan_.size() && plan_[next_] == model) ++next_;
    if (next_ < plan_.size()) Prefetch(plan_[next_]);
    ModelBody body(store_, name, model, std::move(fn), Checkpoint(name, [this] { return ctx_.Cancelled(); }));
    auto outcome = ladder_.Run(owner_, stage, body);
    if (!outcome.ok()) return outcome.status();
    outcome->upload_wait_ms += prefetch_wait_ms;
    v1::StageReport r;
    r.set_name(name);
    r.set_model(model);
    r.set_ms(outcome->ms);
    r.set_mode(ToProto(outcome->mode));
    r.set_attempts(outcome->attempts);
    r.set_tile(outcome->tile_px);
    r.set_upload_wait_ms(outcome->upload_wait_ms);
    r.set_peak_bytes(outcome->peak_bytes);
    Finish(r, progress, outcome->degradations);
    return absl::OkStatus();
  }

  // Admits `bytes` of host buffers (images a stage produces) on the host tier before they are
  // allocated; the lease must outlive them. RESOURCE_EXHAUSTED / DEADLINE_EXCEEDED as
  // ResidencyManager::AcquireHost, with `what` in the message.
  absl::StatusOr<Lease> HostBuffers(const std::string& what, uint64_t bytes) {
    return residency_.AcquireHost(owner_, what, bytes, absl::Now() + ladder_.admission_timeout(),
                                  [this] { return ctx_.Cancelled(); });
  }

  // A host stage (no model, no lease): runs `fn` and reports it with mode HOST.
  absl::Status HostStage(const std::string& name, float progress,
                         const std::function<absl::Status(const Checkpoint&)>& fn) {
    if (ctx_.Cancelled()) return absl::CancelledError(absl::StrCat("job cancelled before stage '", name, "'"));
    ctx_.StageStarted(name, progress);
    const absl::Time start = absl::Now();
    if (absl::Status st = fn(Checkpoint(name, [this] { return ctx_.Cancelled(); })); !st.ok()) return st;
    v1::StageReport r;
    r.set_name(name);
    r.set_ms(absl::ToDoubleMilliseconds(absl::Now() - start));
    r.set_mode(v1::HOST);
    r.set_attempts(1);
    Finish(r, progress, {});
    return absl::OkStatus();
  }

 private:
  // Uploads `model` on a worker thread when it fits in the free budget now, evicting nothing
  // (DESIGN.md §3 prefetch; on CUDA the upload itself runs on a side stream from pinned memory,
  // ModelStore::Upload). Failures only cost the wait.
  void Prefetch(const std::string& model) {
    const ResidencySnapshot s = residency_.Snapshot();
    for (const ModelSnapshot& m : s.models) {
      if (m.name != model) continue;
      if (m.state != ModelState::kAbsent && m.state != ModelState::kHost) return;  // there or coming
      if (s.device.used_bytes + s.device.reserved_bytes + m.bytes > s.device.budget_bytes) return;
      ResidencyManager* r = &residency_;
      prefetch_ = std::async(std::launch::async, [r, model] {
        (void)r->Load(model, absl::Now() + absl::Seconds(5));
      });
      return;
    }
  }

  void Finish(const v1::StageReport& r, float progress, const std::vector<std::string>& degradations) {
    *report_.add_stages() = r;
    for (const std::string& d : degradations) {
      report_.add_degradations(d);
      ctx_.Degradation(d);
    }
    ctx_.StageFinished(r, progress);
  }

  const ModelStore& store_;
  ResidencyManager& residency_;
  OomLadder& ladder_;
  const Owner owner_;
  jobs::JobRunner::Context& ctx_;
  v1::JobResult& report_;
  const std::vector<std::string> plan_;
  size_t next_ = 0;
  std::future<void> prefetch_;
};

absl::StatusOr<Picture> MakePicture(const cv::Mat& bgr, std::string what) {
  Picture p;
  p.what = std::move(what);
  p.bgr = bgr;
  cv::cvtColor(bgr, p.rgb, cv::COLOR_BGR2RGB);
  return p;
}

std::string Bucket(const cv::Mat& m) { return absl::StrCat(m.cols, "x", m.rows); }

// Decodes `bytes` after admitting its memory on the host tier (DecodeHostBytes, from the
// screened header): the image's buffers plus `extra_per_px` bytes per pixel of working copies
// the job makes of it under `*buffers` (the caller holds it while it uses them), the decoder's
// scratch under a lease that ends here. Errors: ScreenImage's and DecodeImage's
// INVALID_ARGUMENT; RESOURCE_EXHAUSTED / DEADLINE_EXCEEDED naming "stage 'decode'", the host
// tier and the bytes (ResidencyManager::AcquireHost).
absl::StatusOr<DecodedImage> AdmittedDecode(Execution& run, const std::string& bytes, const std::string& what,
                                            uint64_t max_pixels, uint64_t extra_per_px, Lease* buffers) {
  auto header = image::ScreenImage(bytes, what, max_pixels);
  if (!header.ok()) return header.status();
  const DecodeFootprint f = DecodeHostBytes(*header, bytes.size());
  const std::string size = absl::StrCat(header->width, "x", header->height);
  auto kept = run.HostBuffers(absl::StrCat("stage 'decode': the ", what, "'s ", size, " buffers"),
                              f.kept + header->pixels() * extra_per_px);
  if (!kept.ok()) return kept.status();
  auto scratch = run.HostBuffers(absl::StrCat("stage 'decode': the ", what, " decoder's ", size, " scratch"),
                                 f.scratch);
  if (!scratch.ok()) return scratch.status();
  auto img = DecodeImage(bytes, what, max_pixels);
  if (img.ok()) *buffers = *std::move(kept);
  return img;
}

}  // namespace

namespace {

struct FaceStages {
  std::string landmarks, encoder, generator, enhancer, blender, upscaler;
};

constexpr uint64_t kCropPixels = 256 * 256;
// Context pixels an ESRGAN tile reads on each side, for the ladder's tile estimates: the
// catalogue's KerasModel::halo_px() (printed by EnhancerEstimate.WorkingSetPerPixelCovers...):
// 10 for esrgan-slim-*, 18 for esrgan-medium-*; any other enhancer counts 18 (the larger).
int EsrganHaloPx(const std::string& model) { return absl::StartsWith(model, "esrgan-slim-") ? 10 : 18; }

// Host bytes the upscale holds at once for a frame of `pixels` upscaled s2 = s*s times in area:
// the 8-bit RGB copy and float input (3 + 12 B/px), the float output and its 8-bit conversion
// (12 + 3 B/px of output), and the target's original and BGR resized to the output size
// (original_elem + 3 B/px of output).
uint64_t UpscaleHostBytes(uint64_t pixels, uint64_t s2, uint64_t original_elem) {
  return pixels * 15 + pixels * s2 * (15 + 3 + std::max<uint64_t>(original_elem, 3));
}

// The upscale's host images (UpscaleHostBytes) for `target`, and their name in messages.
std::pair<std::string, uint64_t> UpscaleImages(const std::string& upscaler, const v1::JobOptions& o,
                                               const DecodedImage& target) {
  const uint64_t s2 = uint64_t{o.upscale()} * o.upscale();
  return {absl::StrCat("stage 'upscale' (model '", upscaler, "'): the images of the x", o.upscale(),
                       " upscale of a ", target.bgr.cols, "x", target.bgr.rows, " frame"),
          UpscaleHostBytes(target.bgr.total(), s2, target.original.elemSize())};
}

// landmarks -> encode -> generate -> enhance -> blend -> score, on the detected faces.
absl::Status SwapFaces(const FaceStages& m, const v1::JobOptions& o, std::vector<Picture>& pics,
                       Execution& run, v1::JobResult& report, cv::Mat* frame);
// upscale (optional) -> encode the image; fills the output's size and format.
absl::Status FinishJob(const FaceStages& m, const v1::JobOptions& o, const DecodedImage& target,
                       Execution& run, cv::Mat frame, jobs::JobRunner::Output& output);

}  // namespace

absl::StatusOr<jobs::JobRunner::Output> PipelineRunner::Swap(const Owner& owner,
                                                             const std::string& source_image,
                                                             const std::string& target_image,
                                                             const v1::JobOptions& o,
                                                             Context& context) {
  if (absl::Status st = Validate(o); !st.ok()) return st;
  Output output;
  v1::JobResult& report = output.report;
  report.set_device(store_->device());
  auto plan = StageModels(o.SerializeAsString());
  if (!plan.ok()) return plan.status();
  Execution run(*store_, *residency_, ladder_, owner, context, report, *std::move(plan));
  // decode: each image's buffers admitted on the host tier from its header first. The target's
  // lease also covers the working frame the blend draws into (held until the result is encoded)
  // and, for the simple blend, the attempt's copy of it (BlendSimpleOnDevice): 3 B/px each.
  Lease source_buffers, target_buffers, reference_buffers;
  auto source = AdmittedDecode(run, source_image, "source image", options_.max_pixels, 0, &source_buffers);
  if (!source.ok()) return source.status();
  auto target = AdmittedDecode(run, target_image, "target image", options_.max_pixels, o.simple() ? 6 : 3,
                               &target_buffers);
  if (!target.ok()) return target.status();
  const bool by_reference = o.faces() == v1::REFERENCE;
  absl::StatusOr<DecodedImage> reference = DecodedImage{};
  if (by_reference) {
    reference = AdmittedDecode(run, o.reference().inline_bytes(), "reference image", options_.max_pixels, 0,
                               &reference_buffers);
  }
  if (!reference.ok()) return reference.status();
  const DetectSettings detect = DetectSettingsFor(o);
  // The colour conversions: every picture's RGB copy and the result's, admitted before they
  // exist and returned (with the pictures) before the result is encoded.
  uint64_t conversion_bytes = target->bgr.total() * 3;  // the result's RGB copy (score)
  for (const DecodedImage* img : {&*source, &*target, &*reference}) conversion_bytes += img->bgr.total() * 3;
  auto conversions = run.HostBuffers(
      absl::StrCat("stage 'decode': the RGB copies of the images (", target->bgr.cols, "x", target->bgr.rows,
                   " target)"),
      conversion_bytes);
  if (!conversions.ok()) return conversions.status();
  std::vector<Picture> pics;
  for (auto [img, what] : {std::pair{&*source, "source image"}, std::pair{&*target, "target image"},
                           std::pair{&*reference, "reference image"}}) {
    if (img->bgr.empty()) continue;
    auto p = MakePicture(img->bgr, what);
    if (!p.ok()) return p.status();
    pics.push_back(*std::move(p));
  }
  Picture& tgt = pics[1];
  // An upscale whose images can never fit the host tier is refused now, not after the stages.
  if (o.upscale() != 0) {
    const auto [what, bytes] = UpscaleImages(EnhancerFor(o, o.upscale()), o, *target);
    if (absl::Status fits = residency_->CheckHostCanFit(what, bytes); !fits.ok()) return fits;
  }
  // detect
  // Passes run one at a time: the largest network input of any pass bounds the set.
  int detect_side = 0;
  for (const Picture& p : pics) {
    auto side = LargestDetectInput(options_.detector, p.rgb.cols, p.rgb.rows, detect);
    if (!side.ok()) return side.status();
    detect_side = std::max(detect_side, *side);
  }
  const uint64_t detect_px = static_cast<uint64_t>(detect_side) * detect_side;
  absl::Status st = run.Stage("detect", options_.detector, detect_px, absl::StrCat(detect_side, "x", detect_side), 0.05f,
                              [&](const ModelCopy& m, int tile, const Checkpoint& cp) {
                                for (Picture& p : pics) {
                                  if (absl::Status s = DetectFaces(m, tile, detect, p, cp.Within(p.what)); !s.ok()) {
                                    return s;
                                  }
                                }
                                return absl::OkStatus();
                              });
  if (!st.ok()) return st;
  for (Picture& p : pics) {
    if (p.faces.empty()) return absl::FailedPreconditionError(absl::StrCat("no face in the ", p.what));
    // The source and reference faces are the largest of their image; LARGEST keeps one target.
    if (&p != &tgt || o.faces() == v1::LARGEST) p.faces = {p.faces[LargestFace(p.faces)]};
  }
  if (tgt.faces.size() > options_.max_faces) tgt.faces.resize(options_.max_faces);
  const FaceStages stages{options_.landmarks, options_.encoder, options_.generator,
                          o.enhance_scale() != 0 ? EnhancerFor(o, o.enhance_scale()) : "",
                          options_.blender, o.upscale() != 0 ? EnhancerFor(o, o.upscale()) : ""};
  cv::Mat frame;
  st = SwapFaces(stages, o, pics, run, report, &frame);
  if (!st.ok()) return st;
  // What the encode no longer needs goes back first: the pictures' RGB copies, the source and
  // reference images.
  pics.clear();
  conversions->Release();
  *source = DecodedImage{};
  *reference = DecodedImage{};
  source_buffers.Release();
  reference_buffers.Release();
  st = FinishJob(stages, o, *target, run, std::move(frame), output);
  if (!st.ok()) return st;
  return output;
}

namespace {

// Frame pixels one face's simple blend holds at once: the hull's bounding box (landmarks' box
// within the frame) and the crop.
uint64_t BlendPixels(const models::BlendInput& in, cv::Size frame) {
  const cv::Rect box = cv::boundingRect(in.landmarks) & cv::Rect(0, 0, frame.width, frame.height);
  return static_cast<uint64_t>(box.area()) + in.fused_crop.total();
}

// Simple mode: the feather-blend model stage (at:: ops on the device, under the ladder), faces
// one at a time. Full mode: Poisson blending is a global solve, host code by design (HOST).
absl::Status BlendFaces(const FaceStages& m, const v1::JobOptions& o, const Picture& tgt,
                        const std::vector<SwapItem>& items, Execution& run, cv::Mat* frame) {
  models::BlendOptions options;
  options.mode = o.simple() ? models::BlendMode::kSimple : models::BlendMode::kFull;
  options.colour_correction = !o.simple();
  std::vector<models::BlendInput> faces;
  uint64_t pixels = 1;
  for (const SwapItem& it : items) {
    faces.push_back({it.fused, it.target_crop, it.frame_to_crop, Points(tgt.faces[it.face].landmarks)});
    pixels = std::max(pixels, BlendPixels(faces.back(), frame->size()));
  }
  if (o.simple()) {
    uint64_t bucket = 1;  // estimates per power-of-two pixel count: faces differ in size
    while (bucket < pixels) bucket *= 2;
    return run.Stage("blend", m.blender, pixels, absl::StrCat("<=", bucket, "px"), 0.75f,
                     [&](const ModelCopy& c, int, const Checkpoint& cp) {
                       return BlendSimpleOnDevice(c, faces, options, frame, cp);
                     });
  }
  return run.HostStage("blend", 0.75f, [&](const Checkpoint& cp) {
    for (size_t i = 0; i < faces.size(); ++i) {
      if (absl::Status s = cp.Check("face", i, faces.size()); !s.ok()) return s;
      if (absl::Status s = models::BlendFace(faces[i], options, frame); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
}

absl::Status SwapFaces(const FaceStages& m, const v1::JobOptions& o, std::vector<Picture>& pics,
                       Execution& run, v1::JobResult& report, cv::Mat* frame) {
  Picture& src = pics[0];
  Picture& tgt = pics[1];
  const bool by_reference = pics.size() > 2;
  // Faces are processed one at a time: a stage's working set is that of one face.
  absl::Status st = run.Stage("landmarks", m.landmarks, 112 * 112, "112x112", 0.15f,
                              [&](const ModelCopy& c, int, const Checkpoint& cp) {
                                for (Picture& p : pics) {
                                  if (absl::Status s = FindLandmarks(c, p, cp.Within(p.what)); !s.ok()) return s;
                                }
                                return absl::OkStatus();
                              });
  if (!st.ok()) return st;
  st = run.Stage("encode", m.encoder, 150 * 150, "150x150", 0.25f, [&](const ModelCopy& c, int, const Checkpoint& cp) {
    if (absl::Status s = DescribeFaces(c, src, {}, cp.Within(src.what)); !s.ok()) return s;
    if (!by_reference) return absl::OkStatus();
    if (absl::Status s = DescribeFaces(c, pics[2], {}, cp.Within(pics[2].what)); !s.ok()) return s;
    return DescribeFaces(c, tgt, {}, cp.Within(tgt.what));
  });
  if (!st.ok()) return st;

  std::vector<SwapItem> items;
  const float limit = o.reference_max_distance() > 0 ? o.reference_max_distance() : 0.6f;
  for (size_t i = 0; i < tgt.faces.size(); ++i) {
    if (!by_reference || DescriptorDistance(tgt.faces[i].descriptor, pics[2].faces[0].descriptor) < limit) {
      items.push_back(SwapItem{.face = i});
    }
  }
  if (items.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no face of the target image is within identity distance ", limit, " of the reference face"));
  }
  std::vector<std::string> source_notes;
  st = run.Stage("generate", m.generator, kCropPixels, "256x256", 0.45f,
                 [&](const ModelCopy& c, int, const Checkpoint& cp) {
                   return Generate(c, c.device, src, tgt, o.ratio(), items, cp, &source_notes);
                 });
  if (!st.ok()) return st;
  for (const std::string& note : source_notes) run.Degrade(note);

  if (!m.enhancer.empty()) {
    int scale = 1;
    st = run.Stage("enhance", m.enhancer, kCropPixels, "256x256", 0.6f,
                   [&](const ModelCopy& c, int tile, const Checkpoint& cp) {
                     std::vector<cv::Mat> up;
                     for (size_t i = 0; i < items.size(); ++i) {
                       if (absl::Status s = cp.Check("face", i, items.size()); !s.ok()) return s;
                       cv::Mat crop = items[i].fused.clone();
                       const Checkpoint tiles = cp.Within(absl::StrCat("face ", i + 1, " of ", items.size()));
                       if (absl::Status s = Enhance(c, c.device, tile, crop, tiles); !s.ok()) return s;
                       up.push_back(crop);
                     }
                     for (size_t i = 0; i < items.size(); ++i) items[i].fused = up[i];
                     scale = EnhanceScale(c);
                     return absl::OkStatus();
                   },
                   // Tiles from half the 256-px crop down to 32 px: a 64-px tile of esrgan-slim-x4
                   // with its 10-px halo still peaks at about 72 MB (measured 673 MB untiled).
                   /*max_tile_px=*/128, /*min_tile_px=*/32, EsrganHaloPx(m.enhancer));
    if (!st.ok()) return st;
    for (SwapItem& it : items) {  // the target crop and transform at the enhanced size
      cv::resize(it.target_crop, it.target_crop, it.fused.size(), 0, 0, cv::INTER_CUBIC);
      it.frame_to_crop = it.frame_to_crop * static_cast<double>(scale);
    }
  }

  *frame = tgt.bgr.clone();
  st = BlendFaces(m, o, tgt, items, run, frame);
  if (!st.ok()) return st;

  cv::Mat result_rgb;
  cv::cvtColor(*frame, result_rgb, cv::COLOR_BGR2RGB);
  // Each swapped face in the result and, unless the encode stage did it, in the target.
  std::vector<FaceDescriptor> scored(items.size()), before(items.size());
  st = run.Stage("score", m.encoder, 150 * 150, "150x150", 0.85f, [&](const ModelCopy& c, int, const Checkpoint& cp) {
    for (size_t i = 0; i < items.size(); ++i) {
      if (absl::Status s = cp.Check("face", i, items.size()); !s.ok()) return s;
      const DetectedFace& face = tgt.faces[items[i].face];
      if (absl::Status s = Describe(c, result_rgb, face.landmarks, &scored[i]); !s.ok()) return s;
      before[i] = face.descriptor;
      if (face.described) continue;
      if (absl::Status s = Describe(c, tgt.rgb, face.landmarks, &before[i]); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  for (size_t i = 0; i < items.size(); ++i) {
    const faceapi::FaceBox& b = tgt.faces[items[i].face].box;
    v1::FaceReport* f = report.add_faces();
    for (float v : {b.x, b.y, b.w, b.h}) f->add_box(v);
    f->set_identity_distance(DescriptorDistance(scored[i], src.faces[0].descriptor));
    f->set_target_identity_distance(DescriptorDistance(before[i], src.faces[0].descriptor));
  }
  report.set_faces_swapped(static_cast<uint32_t>(items.size()));
  return absl::OkStatus();
}

absl::Status FinishJob(const FaceStages& m, const v1::JobOptions& o, const DecodedImage& target,
                       Execution& run, cv::Mat frame, jobs::JobRunner::Output& output) {
  DecodedImage base = target;
  Lease buffers;  // the upscale's host images, admitted before they exist
  if (!m.upscaler.empty()) {
    const auto [what, bytes] = UpscaleImages(m.upscaler, o, target);
    auto admitted = run.HostBuffers(what, bytes);
    if (!admitted.ok()) return admitted.status();
    buffers = *std::move(admitted);
    cv::Mat rgb01;
    cv::cvtColor(frame, rgb01, cv::COLOR_BGR2RGB);
    rgb01.convertTo(rgb01, CV_32FC3, 1.0 / 255.0);
    absl::Status st = run.Stage("upscale", m.upscaler, frame.total(), Bucket(frame), 0.9f,
                                [&](const ModelCopy& c, int tile, const Checkpoint& cp) {
                                  cv::Mat up = rgb01;  // Enhance replaces it only on success
                                  if (absl::Status s = Enhance(c, c.device, tile, up, cp); !s.ok()) return s;
                                  rgb01 = up;
                                  return absl::OkStatus();
                                },
                                // Down to 32 px as enhance: a 32-px esrgan-slim-x4 tile with its
                                // halo needs ~30 MB, so an x4 upscale runs tiled on a 64 MiB device.
                                /*max_tile_px=*/256, /*min_tile_px=*/32, EsrganHaloPx(m.upscaler));
    if (!st.ok()) return st;
    rgb01.convertTo(frame, CV_8UC3, 255.0);
    cv::cvtColor(frame, frame, cv::COLOR_RGB2BGR);
    // Alpha and depth of the target, resized to the new size (every pixel counts as changed).
    cv::resize(target.original, base.original, frame.size(), 0, 0, cv::INTER_CUBIC);
    cv::resize(target.bgr, base.bgr, frame.size(), 0, 0, cv::INTER_CUBIC);
  }
  // encode: its working set and the encoded bytes admitted on the host tier first.
  auto encoding = run.HostBuffers(
      absl::StrCat("stage 'encode': the ", o.format() == v1::JPEG ? "JPEG" : "PNG", " encoding of a ", frame.cols,
                   "x", frame.rows, " result"),
      EncodeHostBytes(base, o.format()));
  if (!encoding.ok()) return encoding.status();
  auto encoded = EncodeResult(base, frame, o.format());
  if (!encoded.ok()) return encoded.status();
  output.image = *std::move(encoded);
  output.report.set_state(v1::SUCCEEDED);
  output.report.set_format(o.format() == v1::JPEG ? v1::JPEG : v1::PNG);
  output.report.set_width(static_cast<uint32_t>(frame.cols));
  output.report.set_height(static_cast<uint32_t>(frame.rows));
  return absl::OkStatus();
}

}  // namespace

}  // namespace fusion
