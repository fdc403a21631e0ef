// The face-fusion pipeline as a JobRunner (pipeline_runner.h). No LibTorch in this TU: the
// stage computations are in stages.cc.
#include "pipeline/pipeline_runner.h"

#include <atomic>
#include <cstring>
#include <functional>
#include <future>
#include <optional>
#include <thread>

#include <opencv2/imgproc.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "fusion_status.h"
#include "device/cpu_device_memory.h"
#include "image/image_header.h"
#include "models/blend/blend.h"
#include "pipeline/execution.h"
#include "pipeline/face_swap.h"
#include "pipeline/image_io.h"
#include "pipeline/job_options.h"
#include "pipeline/stages.h"
#include "pipeline/target_kind.h"
#include "base/status_macros.h"

namespace fusion {
PipelineRunner::PipelineRunner(ModelStore* store, ResidencyManager* residency, DeviceMeter* meter,
                               FaultInjector* faults, Options options)
    : store_(store), residency_(residency), meter_(meter), faults_(faults),
      options_(std::move(options)), ladder_(residency, meter, faults, options_.ladder),
      face_cache_(options_.face_cache_bytes == 0
                      ? nullptr
                      : std::make_unique<FaceCache>(residency, FaceCache::Options{.capacity_bytes = options_.face_cache_bytes})) {}

std::string PipelineRunner::AnalysisSettings(const DetectSettings& d) const {
  // The models, the device they run on, and the scan's settings; float bits exactly.
  uint32_t score_bits = 0;
  static_assert(sizeof(score_bits) == sizeof(d.min_score));
  std::memcpy(&score_bits, &d.min_score, sizeof(score_bits));
  return absl::StrCat("|", options_.detector, "|", options_.landmarks, "|", options_.encoder, "|", store_->device(),
                      "|", d.min_face_px, "|", score_bits, "|", d.max_input);
}

std::string PipelineRunner::EnhancerFor(const v1::JobOptions& o, uint32_t scale) const {
  if (!o.enhance_model().empty() && scale == o.enhance_scale()) return o.enhance_model();
  return scale == 4 ? options_.enhancer_x4 : options_.enhancer_x2;
}

absl::Status PipelineRunner::Validate(const v1::JobOptions& o) const {
  return ValidateJobOptions(o, store_->catalogue());
}

absl::StatusOr<jobs::JobPlan> PipelineRunner::Plan(const v1::JobOptions& o, const std::string& source_image,
                                                  const std::string& target_image) {
  ASSIGN_OR_RETURN(auto models, StageModels(o));
  jobs::JobPlan plan{.options = o, .stage_models = std::move(models)};
  // The images' own faults (unknown format, corrupt or cut header, too many pixels) are found
  // from their bytes here, as a job's decode would find them: stage "decode".
  auto target = ClassifyTarget(target_image, o, options_.max_pixels);
  if (!target.ok()) return WithStage(target.status(), "decode");
  if (target->kind == TargetKind::kVideo && o.upscale() != 0) {
    return absl::InvalidArgumentError("options: upscale applies to image targets only, not a video");
  }
  plan.target = target->kind == TargetKind::kVideo ? v1::VIDEO : v1::IMAGE;
  auto bound = ScreenImages(o, *target, source_image, target_image);
  if (!bound.ok()) return WithStage(bound.status(), "decode");
  plan.result_bound_bytes = *bound;
  return plan;
}

absl::StatusOr<uint64_t> PipelineRunner::ScreenImages(const v1::JobOptions& o, const TargetClass& target,
                                                     const std::string& source_image,
                                                     const std::string& target_image) const {
  RETURN_IF_ERROR(image::ScreenImage(source_image, "source image", options_.max_pixels).status());
  if (o.faces() == v1::REFERENCE) {
    RETURN_IF_ERROR(image::ScreenImage(o.reference().inline_bytes(), "reference image", options_.max_pixels).status());
  }
  if (target.kind == TargetKind::kImage) {
    return EncodedResultBound(target.image, o.upscale() != 0 ? o.upscale() : 1, o.format());
  }
  // A video: an estimate (the result re-encodes the target's frames at its size and bit rate).
  return 2 * uint64_t{target_image.size()};
}

int PipelineRunner::JobThreads() const {
  if (options_.job_threads != 0) return static_cast<int>(options_.job_threads);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

DetectSettings PipelineRunner::DetectSettingsFor(const v1::JobOptions& o) const {
  DetectSettings d;
  d.min_face_px = static_cast<int>(o.min_face_px() != 0 ? o.min_face_px() : options_.default_min_face_px);
  d.min_score = o.min_face_score() != 0 ? o.min_face_score() : options_.default_min_face_score;
  const uint32_t cap = o.max_side() != 0 ? o.max_side()
                       : o.low_vram()    ? options_.low_vram_detect_max_input
                                         : options_.detect_max_input;
  d.max_input = static_cast<int>(std::clamp<uint32_t>(cap / 32 * 32, 416, 1024));
  d.threads = JobThreads();
  return d;
}

absl::StatusOr<std::vector<std::string>> PipelineRunner::StageModels(const v1::JobOptions& o) const {
  RETURN_IF_ERROR(Validate(o));
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
  const Owner owner{job.id, static_cast<uint32_t>(job.owner_uid)};
  // A job journalled before plans were has none: it is made now, as at submit.
  auto out = job.plan.target != v1::JOB_KIND_UNSPECIFIED ? Execute(owner, job.plan, source_image, target_image, context)
                                                         : Swap(owner, source_image, target_image, job.plan.options, context);
  if (out.ok()) out->report.set_job_id(job.id);
  return out;
}

namespace {

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

// Stores the source's and reference's fresh analyses (keys[k] set, not from the cache) when
// the stages that made them all ran in the normal mode: DEVICE, untiled on the device copy (a
// tiled or CPU-fallback result may differ in the last float bits from what a hit stands for).
void CacheAnalyses(const std::vector<Picture>& pics, const std::vector<std::string>& keys,
                   const v1::JobResult& report, FaceCache* cache) {
  for (const v1::StageReport& r : report.stages()) {
    if ((r.name() == "detect" || r.name() == "landmarks" || r.name() == "encode") && r.mode() != v1::DEVICE) return;
  }
  for (size_t k = 0; k < pics.size(); ++k) {
    const Picture& p = pics[k];
    if (keys[k].empty() || p.analysed || p.faces.size() != 1 || !p.faces[0].described) continue;
    cache->Insert(keys[k], FaceAnalysis{p.faces[0], p.turned});
  }
}

// upscale (optional) -> encode the image; fills the output's size and format.
absl::Status FinishJob(const FaceStages& m, const v1::JobOptions& o, const DecodedImage& target,
                       Execution& run, cv::Mat frame, jobs::JobRunner::Output& output);

// Fails a picture without a face (naming a turned one); keeps the largest face of the source and
// the reference, and of the target with --faces largest; notes every turned face.
absl::Status ChooseFaces(Execution& run, const v1::JobOptions& o, std::vector<Picture>& pics) {
  for (Picture& p : pics) {
    for (const TurnedFace& t : p.turned) run.Degrade(TurnedFaceNote(p.what, t));
    if (p.faces.empty() && !p.turned.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("no upright face in the ", p.what, ": ", TurnedFaceNote(p.what, p.turned[0])));
    }
    if (p.faces.empty()) return absl::FailedPreconditionError(absl::StrCat("no face in the ", p.what));
    // The source and reference faces are the largest of their image; LARGEST keeps one target.
    if (&p != &pics[1] || o.faces() == v1::LARGEST) p.faces = {p.faces[LargestFace(p.faces)]};
  }
  return absl::OkStatus();
}

}  // namespace

// detect: every picture not from the face cache, in one stage.
absl::Status PipelineRunner::DetectPictures(Execution& run, const DetectSettings& detect,
                                            std::vector<Picture>& pics) const {
  // Passes run detect.threads at a time: that many of the largest network input bound the set.
  int detect_side = 0;
  for (const Picture& p : pics) {
    if (p.analysed) continue;
    ASSIGN_OR_RETURN(auto side, LargestDetectInput(options_.detector, p.rgb.cols, p.rgb.rows, detect));
    detect_side = std::max(detect_side, side);
  }
  // Progress moves from 5% to 15% (the landmarks stage's) over the pictures' scan passes: a
  // large target's detection is most of the job (seconds to minutes).
  return run.Stage("detect", options_.detector, DetectStagePixels(detect_side, detect),
                   DetectStageBucket(detect_side, detect), 0.05f,
                   [&](const ModelCopy& m, int tile, const Checkpoint& cp) {
                     for (size_t k = 0; k < pics.size(); ++k) {
                       Picture& p = pics[k];
                       if (p.analysed) continue;  // from the face cache
                       std::atomic<size_t> started{0};  // passes may run several at once
                       auto on_pass = [&](size_t, size_t n) {
                         const size_t i = started.fetch_add(1);
                         const float f = (k + static_cast<float>(i) / std::max<size_t>(1, n)) / pics.size();
                         run.Progress("detect", absl::StrCat(p.what, ": pass ", i + 1, " of ", n), 0.05f + 0.10f * f);
                       };
                       RETURN_IF_ERROR(DetectFaces(m, tile, detect, p, cp.Within(p.what), on_pass));
                     }
                     return absl::OkStatus();
                   });
}

absl::StatusOr<jobs::JobRunner::Output> PipelineRunner::Swap(const Owner& owner,
                                                             const std::string& source_image,
                                                             const std::string& target_image,
                                                             const v1::JobOptions& o,
                                                             Context& context) {
  ASSIGN_OR_RETURN(auto plan, Plan(o, source_image, target_image));
  return Execute(owner, plan, source_image, target_image, context);
}

absl::StatusOr<jobs::JobRunner::Output> PipelineRunner::Execute(const Owner& owner, const jobs::JobPlan& plan,
                                                                const std::string& source_image,
                                                                const std::string& target_image, Context& context) {
  const v1::JobOptions& o = plan.options;
  Output output;
  v1::JobResult& report = output.report;
  report.set_device(store_->device());
  Execution run(*store_, *residency_, ladder_, owner, context, report, plan.stage_models);
  if (plan.target == v1::VIDEO) return SwapVideo(run, source_image, target_image, o, output);
  report.set_kind(v1::IMAGE);
  // decode: each image's buffers admitted on the host tier from its header first. The target's
  // lease also covers the working frame the blend draws into (held until the result is encoded)
  // and, for the simple blend, the attempt's copy of it (BlendSimpleOnDevice): 3 B/px each.
  Lease source_buffers, target_buffers, reference_buffers;
  // Its own stage event, so that a damaged image fails in stage "decode" (not in none).
  context.StageStarted("decode", 0);
  auto source = AdmittedDecode(run, source_image, "source image", options_.max_pixels, 0, &source_buffers);
  if (!source.ok()) return source.status();
  ASSIGN_OR_RETURN(auto target, AdmittedDecode(run, target_image, "target image", options_.max_pixels, o.simple() ? 6 : 3,
                               &target_buffers));
  const bool by_reference = o.faces() == v1::REFERENCE;
  absl::StatusOr<DecodedImage> reference = DecodedImage{};
  if (by_reference) {
    reference = AdmittedDecode(run, o.reference().inline_bytes(), "reference image", options_.max_pixels, 0,
                               &reference_buffers);
  }
  if (!reference.ok()) return reference.status();
  const DetectSettings detect = DetectSettingsFor(o);
  // The source's and reference's analyses from the face cache: such a picture gets no RGB copy
  // and skips detect, landmarks and encode.
  const std::pair<const DecodedImage*, const char*> images[3] = {
      {&*source, "source image"}, {&target, "target image"}, {&*reference, "reference image"}};
  const std::string* bytes_of[3] = {&source_image, nullptr, by_reference ? &o.reference().inline_bytes() : nullptr};
  std::string keys[3];  // of images[k] ("" for none)
  std::optional<FaceAnalysis> hits[3];
  for (int k = 0; k < 3; ++k) {
    if (!face_cache_ || bytes_of[k] == nullptr) continue;
    keys[k] = FaceCache::Key(*bytes_of[k], AnalysisSettings(detect));
    hits[k] = face_cache_->Lookup(keys[k]);
  }
  // The colour conversions: every analysed picture's RGB copy and the result's, admitted before
  // they exist and returned (with the pictures) before the result is encoded.
  uint64_t conversion_bytes = target.bgr.total() * 3;  // the result's RGB copy (score)
  for (int k = 0; k < 3; ++k) conversion_bytes += hits[k] ? 0 : images[k].first->bgr.total() * 3;
  ASSIGN_OR_RETURN(auto conversions, run.HostBuffers(
      absl::StrCat("stage 'decode': the RGB copies of the images (", target.bgr.cols, "x", target.bgr.rows,
                   " target)"),
      conversion_bytes));
  std::vector<Picture> pics;
  std::vector<std::string> pic_keys;  // the cache key of pics[k]
  for (int k = 0; k < 3; ++k) {
    const auto [img, what] = images[k];
    if (img->bgr.empty()) continue;
    pic_keys.push_back(keys[k]);
    if (hits[k]) {
      Picture p;
      p.what = what;
      p.bgr = img->bgr;
      p.faces = {hits[k]->face};
      p.turned = std::move(hits[k]->turned);
      p.analysed = true;
      pics.push_back(std::move(p));
      continue;
    }
    ASSIGN_OR_RETURN(auto p, MakePicture(img->bgr, what));
    pics.push_back(std::move(p));
  }
  Picture& tgt = pics[1];
  // An upscale whose images can never fit the host tier is refused now, not after the stages.
  if (o.upscale() != 0) {
    const auto [what, bytes] = UpscaleImages(EnhancerFor(o, o.upscale()), o, target);
    RETURN_IF_ERROR(residency_->CheckHostCanFit(what, bytes));
  }
  RETURN_IF_ERROR(DetectPictures(run, detect, pics));
  RETURN_IF_ERROR(ChooseFaces(run, o, pics));
  if (tgt.faces.size() > options_.max_faces) tgt.faces.resize(options_.max_faces);
  const FaceStages stages{options_.landmarks, options_.encoder, options_.generator,
                          o.enhance_scale() != 0 ? EnhancerFor(o, o.enhance_scale()) : "",
                          options_.blender, o.upscale() != 0 ? EnhancerFor(o, o.upscale()) : "", JobThreads()};
  cv::Mat frame;
  RETURN_IF_ERROR(SwapFaces(stages, o, pics, run, report, &frame));
  if (face_cache_) CacheAnalyses(pics, pic_keys, report, face_cache_.get());
  // What the encode no longer needs goes back first: the pictures' RGB copies, the source and
  // reference images.
  pics.clear();
  conversions.Release();
  *source = DecodedImage{};
  *reference = DecodedImage{};
  source_buffers.Release();
  reference_buffers.Release();
  RETURN_IF_ERROR(FinishJob(stages, o, target, run, std::move(frame), output));
  return output;
}


namespace {

absl::Status FinishJob(const FaceStages& m, const v1::JobOptions& o, const DecodedImage& target,
                       Execution& run, cv::Mat frame, jobs::JobRunner::Output& output) {
  DecodedImage base = target;
  Lease buffers;  // the upscale's host images, admitted before they exist
  if (!m.upscaler.empty()) {
    const auto [what, bytes] = UpscaleImages(m.upscaler, o, target);
    ASSIGN_OR_RETURN(auto admitted, run.HostBuffers(what, bytes));
    buffers = std::move(admitted);
    cv::Mat rgb01;
    cv::cvtColor(frame, rgb01, cv::COLOR_BGR2RGB);
    rgb01.convertTo(rgb01, CV_32FC3, 1.0 / 255.0);
    absl::Status st = run.Stage("upscale", m.upscaler, frame.total(), Bucket(frame), 0.9f,
                                [&](const ModelCopy& c, int tile, const Checkpoint& cp) {
                                  cv::Mat up = rgb01;  // Enhance replaces it only on success
                                  RETURN_IF_ERROR(Enhance(c, c.device, tile, up, cp));
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
  // encode: a checkpoint first. The encode is one unit that cannot stop (cv::imencode: ~1 s for
  // the 11-MP mosaic here, several for an upscaled one), and it was not a stage: a drain deadline
  // or a cancel that passed during the last stage let the whole encode run after it.
  run.context().YieldPoint();
  if (run.context().Cancelled()) return absl::CancelledError("job cancelled before stage 'encode'");
  // Its working set and the encoded bytes admitted on the host tier first.
  ASSIGN_OR_RETURN(auto encoding, run.HostBuffers(
      absl::StrCat("stage 'encode': the ", o.format() == v1::JPEG ? "JPEG" : "PNG", " encoding of a ", frame.cols,
                   "x", frame.rows, " result"),
      EncodeHostBytes(base, o.format())));
  ASSIGN_OR_RETURN(output.image, EncodeResult(base, frame, o.format()));
  output.report.set_state(v1::SUCCEEDED);
  output.report.set_format(o.format() == v1::JPEG ? v1::JPEG : v1::PNG);
  output.report.set_width(static_cast<uint32_t>(frame.cols));
  output.report.set_height(static_cast<uint32_t>(frame.rows));
  return absl::OkStatus();
}

}  // namespace

}  // namespace fusion