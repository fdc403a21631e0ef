// PipelineRunner::OpenLive: a live session through the one pipeline (jobs/live_runner.h,
// docs/ARCHITECTURE.md#the-life-of-a-live-frame). No LibTorch in this TU.
//
// Open: the options checked (StageModels, and what a session cannot do), every model of the
// session's stages leased with no working set (so none is evicted while the session lives: its
// frames never wait for an upload), then the source face detected, landmarked and encoded once
// (PrepareSource, as a video job). Frame: decode (or the raw frame's copy) -> VideoFaces (live:
// detect on keyframes, track between, no frame held) -> FrameSwapper (One-Euro per track, the
// per-face core) -> encode (the form the frame came in). The frame's working copies are
// admitted on the host tier when its size is first seen; an encoded frame's decode and encode
// buffers each frame, from its header, before they exist. A frame of another size restarts the
// tracking (no track continues across it).
#include <algorithm>
#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/size.h"
#include "base/status_macros.h"
#include "fusion_status.h"
#include "jobs/live_runner.h"
#include "pipeline/execution.h"
#include "pipeline/frame_swapper.h"
#include "pipeline/image_io.h"
#include "pipeline/pipeline_runner.h"
#include "pipeline/video_faces.h"

namespace fusion {
namespace {

// The session's Context: no events (a session reports per frame), cancelled when the rpc layer
// says so (the client went away, the daemon stops).
// The keyframe scans' context gives way to live frames at its checkpoints (`give_way`).
class LiveContext final : public jobs::JobRunner::Context {
 public:
  explicit LiveContext(std::function<bool()> cancelled, std::function<void()> give_way = nullptr)
      : cancelled_(std::move(cancelled)), give_way_(std::move(give_way)) {}
  bool Cancelled() const override { return cancelled_ && cancelled_(); }
  void GiveWay() override {
    if (give_way_ && !Cancelled()) give_way_();
  }
  void StageStarted(const std::string&, float) override {}
  void StageFinished(const v1::StageReport&, float) override {}
  void Degradation(const std::string&) override {}

 private:
  const std::function<bool()> cancelled_;
  const std::function<void()> give_way_;
};

double MsSince(absl::Time t) { return absl::ToDoubleMilliseconds(absl::Now() - t); }

// Host bytes a session holds for frames of w x h between frames: the decoded frame, its RGB
// picture, the blend's working frame and (simple) its attempt's copy, the output, and the frame
// before, input and output, for the flicker sums: 3 B/px each.
uint64_t FrameHostBytes(int w, int h, bool simple) {
  return static_cast<uint64_t>(w) * static_cast<uint64_t>(h) * 3 * (simple ? 7 : 6);
}

bool IsJpeg(const std::string& bytes) {
  return bytes.size() >= 3 && static_cast<unsigned char>(bytes[0]) == 0xFF &&
         static_cast<unsigned char>(bytes[1]) == 0xD8 && static_cast<unsigned char>(bytes[2]) == 0xFF;
}

// INVALID_ARGUMENT for what a session does not do.
absl::Status CheckLiveOptions(const v1::JobOptions& o) {
  const char* bad = o.upscale() != 0                ? "upscale"
                    : o.faces() == v1::REFERENCE    ? "faces REFERENCE"
                    : o.start_seconds() != 0 || o.duration_seconds() != 0 ? "start_seconds/duration_seconds"
                    : o.video_crf() != 0 || !o.video_preset().empty()     ? "video_crf/video_preset"
                                                                          : nullptr;
  if (bad == nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("options: ", bad, " does not apply to a live session"));
}

class PipelineLiveSession final : public jobs::LiveSession {
 public:
  struct Parts {
    const ModelStore* store;
    ResidencyManager* residency;
    OomLadder* ladder;
    PipelineRunner::Options options;
    v1::JobOptions job;
    DetectSettings detect;
    FaceStages stages;
    std::vector<std::string> plan;  // StageModels
  };
  PipelineLiveSession(Parts parts, const Owner& owner, std::function<bool()> cancelled, std::function<void()> give_way)
      : p_(std::move(parts)), context_(cancelled),
        run_(*p_.store, *p_.residency, *p_.ladder, owner, context_, report_, p_.plan),
        scan_context_([this, cancelled] { return closing_.load() || (cancelled && cancelled()); }, std::move(give_way)),
        scan_run_(*p_.store, *p_.residency, *p_.ladder, owner, scan_context_, scan_report_,
                  {p_.options.detector, p_.options.landmarks}) {
    run_.set_per_frame(true);
    scan_run_.set_per_frame(true);
  }
  ~PipelineLiveSession() override {
    closing_ = true;   // a keyframe scan running ends at its next checkpoint
    swapper_.reset();  // before the pictures and leases it refers to
    faces_.reset();    // waits for the scan
  }

  const std::vector<std::string>& models() const override { return models_; }
  uint64_t model_bytes() const override { return model_bytes_; }
  const std::string& device() const override { return p_.store->device(); }

  // Leases every model of the session (no working set); RESOURCE_EXHAUSTED naming the bytes.
  absl::Status LeaseModels(const Owner& owner);
  // The device bytes of the session's models as the residency manager has them now.
  uint64_t LeasedBytes() const {
    uint64_t bytes = 0;
    for (const ModelSnapshot& m : p_.residency->Snapshot().models) {
      if (std::find(models_.begin(), models_.end(), m.name) != models_.end()) bytes += m.bytes;
    }
    return bytes;
  }
  // The source face, once.
  absl::Status PrepareSource(const std::string& source_image) {
    absl::Status st = fusion::PrepareSource(run_, p_.options, p_.job, p_.detect, source_image, &source_);
    if (st.code() == absl::StatusCode::kInvalidArgument) return WithStage(std::move(st), "decode");
    if (st.code() == absl::StatusCode::kFailedPrecondition) return WithStage(std::move(st), "detect");
    return st;
  }

  absl::Status Frame(const v1::LiveFrame& frame, const std::string& bytes, v1::LiveFrameResult* out) override;

 private:
  // The frame's BGR pixels: raw bytes checked and copied (the tracking started first for a new
  // size, so the copy is admitted before it exists), or an image decoded (*decoded).
  absl::StatusOr<cv::Mat> Pixels(const v1::LiveFrame& frame, const std::string& bytes, const std::string& what,
                                 DecodedImage* decoded, Lease* decode_buffers);
  // First frame, or a frame of another size: its working copies admitted, the tracking anew.
  absl::Status StartTracking(cv::Size size);

  Parts p_;
  LiveContext context_;
  v1::JobResult report_;  // the stages of the frame running (cleared before each)
  Execution run_;
  // The keyframe scans beside the frames (VideoFaces::Settings::scan): their own Execution.
  std::atomic<bool> closing_{false};
  LiveContext scan_context_;
  v1::JobResult scan_report_;
  Execution scan_run_;
  std::vector<Lease> model_leases_;
  std::vector<std::string> models_;
  uint64_t model_bytes_ = 0;
  VideoSource source_;
  Lease frame_buffers_;
  cv::Size size_;
  std::unique_ptr<VideoFaces> faces_;
  std::unique_ptr<FrameSwapper> swapper_;
  int64_t index_ = 0;  // frames swapped so far
};

absl::Status PipelineLiveSession::LeaseModels(const Owner& owner) {
  for (const std::string& m : p_.plan) {
    if (std::find(models_.begin(), models_.end(), m) == models_.end()) models_.push_back(m);
  }
  model_bytes_ = LeasedBytes();  // before they load, the catalogue's figures
  const absl::Time deadline = absl::Now() + p_.ladder->admission_timeout();
  for (const std::string& m : models_) {
    auto lease = p_.residency->Acquire(owner, m, 0, deadline, [this] { return context_.Cancelled(); });
    if (lease.ok()) {
      model_leases_.push_back(*std::move(lease));
      if (model_leases_.size() == models_.size()) model_bytes_ = LeasedBytes();  // as loaded (e.g. bf16)
      continue;
    }
    model_leases_.clear();
    const absl::StatusCode code = lease.status().code();
    if (code != absl::StatusCode::kResourceExhausted && code != absl::StatusCode::kDeadlineExceeded) {
      return lease.status();
    }
    return absl::ResourceExhaustedError(absl::StrCat(
        "live session: its models (", absl::StrJoin(models_, ", "), ") need ", model_bytes_, " bytes (",
        FormatBytes(model_bytes_), ") on the device, held while the session is open, and cannot be held: ",
        lease.status().message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<cv::Mat> PipelineLiveSession::Pixels(const v1::LiveFrame& frame, const std::string& bytes,
                                                    const std::string& what, DecodedImage* decoded,
                                                    Lease* decode_buffers) {
  if (!frame.has_raw()) {
    auto image = AdmittedDecode(run_, bytes, what, p_.options.max_pixels, 0, decode_buffers);
    if (!image.ok()) {
      return image.status().code() == absl::StatusCode::kInvalidArgument ? WithStage(image.status(), "decode")
                                                                          : image.status();
    }
    *decoded = *std::move(image);
    return decoded->bgr;
  }
  const uint64_t w = frame.raw().width(), h = frame.raw().height();
  if (w == 0 || h == 0 || w * h > p_.options.max_pixels) {
    return WithStage(absl::InvalidArgumentError(absl::StrCat(what, ": raw frame of ", w, "x", h, " pixels (limit ",
                                                             p_.options.max_pixels, " pixels, max_pixels)")),
                     "decode");
  }
  if (bytes.size() != w * h * 3) {
    return WithStage(absl::InvalidArgumentError(absl::StrCat(what, ": a raw BGR frame of ", w, "x", h, " has ",
                                                             w * h * 3, " bytes, this one ", bytes.size())),
                     "decode");
  }
  // Copied into the buffers admitted for the frame size (StartTracking) before the copy exists.
  const cv::Size size(static_cast<int>(w), static_cast<int>(h));
  if (swapper_ == nullptr || size != size_) RETURN_IF_ERROR(StartTracking(size));
  return cv::Mat(static_cast<int>(h), static_cast<int>(w), CV_8UC3, const_cast<char*>(bytes.data())).clone();
}

absl::Status PipelineLiveSession::StartTracking(cv::Size size) {
  swapper_.reset();
  faces_.reset();
  frame_buffers_.Release();
  ASSIGN_OR_RETURN(frame_buffers_,
                   run_.HostBuffers(absl::StrCat("live session: the working copies of its ", size.width, "x",
                                                 size.height, " frames"),
                                    FrameHostBytes(size.width, size.height, p_.job.simple())));
  const v1::JobOptions& o = p_.job;
  VideoFaces::Settings s{.every_frame = o.video_detect() == v1::VIDEO_DETECT_EVERY_FRAME,
                         .interval = o.keyframe_interval() != 0 ? static_cast<int>(o.keyframe_interval()) : 15,
                         .live = true,
                         .scan = &scan_run_};
  faces_ = std::make_unique<VideoFaces>(run_, p_.options.detector, p_.options.landmarks, p_.options.encoder,
                                        p_.detect, s);
  RETURN_IF_ERROR(faces_->Init(size.width, size.height));
  swapper_ = std::make_unique<FrameSwapper>(run_, p_.job, p_.stages, source_.pictures, p_.options.max_faces, 0,
                                            /*total=*/0, /*chunk=*/SIZE_MAX, report_, /*score_every=*/0);
  size_ = size;
  return absl::OkStatus();
}

absl::Status PipelineLiveSession::Frame(const v1::LiveFrame& frame, const std::string& bytes,
                                        v1::LiveFrameResult* out) {
  const std::string what = absl::StrCat("live frame ", index_ + 1, " (sequence ", frame.sequence(), ")");
  report_.clear_stages();
  absl::Time t = absl::Now();
  DecodedImage decoded;
  Lease decode_buffers;
  ASSIGN_OR_RETURN(cv::Mat bgr, Pixels(frame, bytes, what, &decoded, &decode_buffers));
  if (swapper_ == nullptr || bgr.size() != size_) RETURN_IF_ERROR(StartTracking(bgr.size()));
  out->mutable_timings()->set_decode_ms(MsSince(t));
  t = absl::Now();
  std::deque<AnalysedFrame> ready;
  RETURN_IF_ERROR(faces_->Push(video::Frame{.bgr = bgr, .pts = index_, .index = index_}, &ready));
  ++index_;
  FrameOutcome outcome;
  for (AnalysedFrame& a : ready) RETURN_IF_ERROR(swapper_->Swap(a, &outcome));  // one: live holds none
  if (ready.size() != 1) return absl::InternalError(absl::StrCat(what, ": tracking held the frame"));
  const cv::Mat result = ready.front().frame.bgr;
  out->mutable_timings()->set_swap_ms(MsSince(t));
  t = absl::Now();
  if (frame.has_raw()) {
    const cv::Mat packed = result.isContinuous() ? result : result.clone();
    out->set_image(reinterpret_cast<const char*>(packed.data), packed.total() * 3);
  } else {
    const v1::OutputFormat format = IsJpeg(bytes) ? v1::JPEG : v1::PNG;
    ASSIGN_OR_RETURN(auto encode_buffers, run_.HostBuffers(absl::StrCat("stage 'encode': ", what),
                                                           EncodeHostBytes(decoded, format)));
    ASSIGN_OR_RETURN(*out->mutable_image(), EncodeResult(decoded, result, format));
  }
  out->mutable_timings()->set_encode_ms(MsSince(t));
  out->set_sequence(frame.sequence());
  out->set_width(static_cast<uint32_t>(result.cols));
  out->set_height(static_cast<uint32_t>(result.rows));
  out->set_faces_swapped(outcome.faces);
  out->set_keyframe(outcome.keyframe);
  *out->mutable_stages() = report_.stages();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<jobs::LiveSession>> PipelineRunner::OpenLive(const Owner& owner,
                                                                           const std::string& source_image,
                                                                           const v1::JobOptions& o,
                                                                           std::function<bool()> cancelled,
                                                                           std::function<void()> give_way) {
  RETURN_IF_ERROR(CheckLiveOptions(o));
  ASSIGN_OR_RETURN(auto plan, StageModels(o));
  // A session's frames are not scored: without the score stage, last in the plan as upscale
  // (after it) is refused by CheckLiveOptions.
  if (!plan.empty() && plan.back() == options_.encoder) plan.pop_back();
  PipelineLiveSession::Parts parts{
      .store = store_,
      .residency = residency_,
      .ladder = &ladder_,
      .options = options_,
      .job = o,
      .detect = DetectSettingsFor(o),
      .stages = FaceStages{options_.landmarks, options_.encoder, options_.generator,
                           o.enhance_scale() != 0 ? EnhancerFor(o, o.enhance_scale()) : "", options_.blender, "",
                           JobThreads()},
      .plan = std::move(plan)};
  auto session = std::make_unique<PipelineLiveSession>(std::move(parts), owner, std::move(cancelled),
                                                       std::move(give_way));
  RETURN_IF_ERROR(session->LeaseModels(owner));
  RETURN_IF_ERROR(session->PrepareSource(source_image));
  return session;
}

}  // namespace fusion
