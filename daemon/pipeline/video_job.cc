// PipelineRunner::SwapVideo: a video target through the one pipeline (pipeline_runner.h,
// DESIGN.md §5b). No LibTorch in this TU.
//
//   decode thread                    job thread                           encode thread
//   VideoReader::Next --[queue N]--> detect/landmarks/generate/blend --[queue N]--> Mp4Writer
//   (frames + audio/subtitle         per frame (Execution per-frame        (H.264; other streams
//    packets, in file order)          mode); packets pass through)          copied) -> FramesDone
//
// The source face is detected, landmarked and encoded once, before the first frame. Frames
// without a face (or, for REFERENCE, none within the distance) pass through unchanged and are
// counted. Memory: both queues hold at most N frames each; the decoder, encoder, queued frames
// and one frame's working copies are admitted on the host tier before the threads start
// (FrameHostBytes), so RAM does not grow with the video's length. Cancellation is checked
// before every frame and inside its stages (checkpoints), so a cancel ends within one frame.
// The result is written to <results_dir>/<job>.mp4.tmp, fsynced and renamed to <job>.mp4.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/bounded_queue.h"
#include "common/mutex.h"
#include "pipeline/execution.h"
#include "pipeline/face_swap.h"
#include "pipeline/pipeline_runner.h"
#include "pipeline/target_kind.h"
#include "video/mp4_writer.h"
#include "video/video_reader.h"

namespace fusion {
namespace {

using video::Item;

// The first error of the job's three threads (later ones are consequences of it).
class FirstError {
 public:
  void Set(absl::Status st) {
    MutexLock lock(&mu_);
    if (status_.ok()) status_ = std::move(st);
  }
  absl::Status Get() {
    MutexLock lock(&mu_);
    return status_;
  }

 private:
  Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

// Frames done / total / fps to the job's context, at most every 250 ms and for the last frame.
class FrameProgress {
 public:
  FrameProgress(jobs::JobRunner::Context& ctx, uint64_t total) : ctx_(ctx), total_(total), start_(absl::Now()) {}
  void Done(uint64_t done) {
    const absl::Time now = absl::Now();
    if (done != total_ && now - last_ < absl::Milliseconds(250)) return;
    last_ = now;
    ctx_.FramesDone(done, total_, Fps(done));
  }
  double Fps(uint64_t done) const {
    const double s = absl::ToDoubleSeconds(absl::Now() - start_);
    return s > 0 ? static_cast<double>(done) / s : 0;
  }

 private:
  jobs::JobRunner::Context& ctx_;
  const uint64_t total_;
  const absl::Time start_;
  absl::Time last_ = absl::InfinitePast();
};

std::string ResultPath(const std::string& dir, const std::string& job_id) {
  return absl::StrCat(dir, "/", job_id.empty() ? "job" : job_id, ".mp4");
}

// Renames the finished temporary file into place and makes the rename durable.
absl::Status Publish(const std::string& tmp, const std::string& path, const std::string& dir) {
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("stage 'encode': cannot rename ", tmp, " to ", path));
  }
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
  return absl::OkStatus();
}

// Host bytes of the video job's frames: the frames the queues and the three threads hold (BGR,
// 3 B/px each) and the job thread's working copies of one frame: its RGB picture and the blend's
// working frame (3 B/px each) and, simple mode, the blend attempt's copy (3 B/px).
uint64_t FrameHostBytes(int w, int h, size_t queue_frames, bool simple) {
  const uint64_t px = static_cast<uint64_t>(w) * static_cast<uint64_t>(h);
  const uint64_t held = 2 * queue_frames + 3;
  return px * 3 * held + px * (simple ? 9 : 6);
}

// The source (and reference) picture of a video job: decoded, detected, landmarked and
// encoded once, before the first frame. Their buffers stay admitted while the job runs.
struct VideoSource {
  Lease source_buffers, reference_buffers;
  std::vector<Picture> pictures;  // [source, reference?]
};

absl::Status PrepareSource(Execution& run, const PipelineRunner::Options& opt, const v1::JobOptions& o,
                           const DetectSettings& detect, const std::string& source_image, VideoSource* out) {
  auto source = AdmittedDecode(run, source_image, "source image", opt.max_pixels, 3, &out->source_buffers);
  if (!source.ok()) return source.status();
  absl::StatusOr<DecodedImage> reference = DecodedImage{};
  if (o.faces() == v1::REFERENCE) {
    reference = AdmittedDecode(run, o.reference().inline_bytes(), "reference image", opt.max_pixels, 3,
                               &out->reference_buffers);
    if (!reference.ok()) return reference.status();
  }
  std::vector<Picture>& fixed = out->pictures;
  for (auto [img, what] : {std::pair{&*source, "source image"}, std::pair{&*reference, "reference image"}}) {
    if (img->bgr.empty()) continue;
    auto p = MakePicture(img->bgr, what);
    if (!p.ok()) return p.status();
    fixed.push_back(*std::move(p));
  }
  int side = 0;
  for (const Picture& p : fixed) {
    auto s = LargestDetectInput(opt.detector, p.rgb.cols, p.rgb.rows, detect);
    if (!s.ok()) return s.status();
    side = std::max(side, *s);
  }
  absl::Status st = run.Stage("detect", opt.detector, uint64_t(side) * side, absl::StrCat(side, "x", side), 0.01f,
                              [&](const ModelCopy& m, int tile, const Checkpoint& cp) {
                                for (Picture& p : fixed) {
                                  if (absl::Status s = DetectFaces(m, tile, detect, p, cp.Within(p.what)); !s.ok()) return s;
                                }
                                return absl::OkStatus();
                              });
  if (!st.ok()) return st;
  for (Picture& p : fixed) {
    if (p.faces.empty()) return absl::FailedPreconditionError(absl::StrCat("no face in the ", p.what));
    p.faces = {p.faces[LargestFace(p.faces)]};
  }
  st = run.Stage("landmarks", opt.landmarks, 112 * 112, "112x112", 0.02f, [&](const ModelCopy& c, int, const Checkpoint& cp) {
    for (Picture& p : fixed) {
      if (absl::Status s = FindLandmarks(c, p, cp.Within(p.what)); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  return run.Stage("encode", opt.encoder, 150 * 150, "150x150", 0.03f, [&](const ModelCopy& c, int, const Checkpoint& cp) {
    for (Picture& p : fixed) {
      if (absl::Status s = DescribeFaces(c, p, {}, cp.Within(p.what)); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
}

// One frame through detect and the per-face core (SwapFaces, source ready, no score); counts.
class FrameSwapper {
 public:
  FrameSwapper(Execution& run, const PipelineRunner::Options& opt, const v1::JobOptions& o, DetectSettings detect,
               FaceStages stages, const std::vector<Picture>& fixed, uint64_t total, v1::JobResult& report)
      : run_(run), opt_(opt), o_(o), detect_(detect), stages_(std::move(stages)), fixed_(fixed), total_(total),
        report_(report) {}

  absl::Status Init(int width, int height) {
    auto side = LargestDetectInput(opt_.detector, width, height, detect_);
    if (!side.ok()) return side.status();
    detect_px_ = uint64_t(*side) * *side;
    bucket_ = absl::StrCat(*side, "x", *side);
    return absl::OkStatus();
  }

  // Replaces frame.bgr with the swapped frame (unchanged when it has no face).
  absl::Status Swap(video::Frame& frame) {
    const std::string what = absl::StrCat("target video frame ", frame.index + 1, " of ", total_);
    if (run_.context().Cancelled()) {
      return absl::CancelledError(absl::StrCat("job cancelled at frame ", frame.index + 1, " of ", total_));
    }
    auto tgt = MakePicture(frame.bgr, what);
    if (!tgt.ok()) return tgt.status();
    std::vector<Picture> pics = {fixed_[0], *std::move(tgt)};
    if (o_.faces() == v1::REFERENCE) pics.push_back(fixed_[1]);
    absl::Status st = run_.Stage("detect", opt_.detector, detect_px_, bucket_, 0.05f,
                                 [&](const ModelCopy& m, int tile, const Checkpoint& cp) {
                                   return DetectFaces(m, tile, detect_, pics[1], cp.Within(what));
                                 });
    if (!st.ok()) return st;
    if (pics[1].faces.empty()) {
      ++frames_without_face;
      return absl::OkStatus();
    }
    if (o_.faces() == v1::LARGEST) pics[1].faces = {pics[1].faces[LargestFace(pics[1].faces)]};
    if (pics[1].faces.size() > opt_.max_faces) pics[1].faces.resize(opt_.max_faces);
    cv::Mat result;
    st = SwapFaces(stages_, o_, pics, run_, report_, &result, FaceWork{.source_ready = true, .score = false});
    if (!st.ok()) return st;
    if (report_.faces_swapped() == 0) {  // none within the reference distance
      ++frames_without_face;
      return absl::OkStatus();
    }
    frame.bgr = result;
    ++frames_swapped;
    faces_swapped += report_.faces_swapped();
    return absl::OkStatus();
  }

  uint64_t frames_swapped = 0, frames_without_face = 0, faces_swapped = 0;

 private:
  Execution& run_;
  const PipelineRunner::Options& opt_;
  const v1::JobOptions& o_;
  const DetectSettings detect_;
  const FaceStages stages_;
  const std::vector<Picture>& fixed_;
  const uint64_t total_;
  v1::JobResult& report_;
  uint64_t detect_px_ = 0;
  std::string bucket_;
};

// decode thread -> [decoded] -> `swap` on this thread -> [swapped] -> encode thread. Returns
// the first error of the three (CANCELLED included) or OK with every frame encoded and the
// writer finished; frames still queued after an error are dropped unencoded.
absl::Status Stream(video::VideoReader& reader, video::Mp4Writer& writer, size_t queue_frames, FrameProgress& progress,
                    const std::function<absl::Status(video::Frame&)>& swap, uint64_t* encoded_frames) {
  BoundedQueue<Item> decoded(queue_frames), swapped(queue_frames);
  FirstError error;
  std::atomic<uint64_t> encoded{0};
  std::thread decoder([&] {
    for (;;) {
      Item item;
      auto more = reader.Next(&item);
      if (!more.ok()) error.Set(more.status());
      if (!more.ok() || !*more || !decoded.Push(std::move(item))) break;
    }
    decoded.Close();
  });
  std::thread encoder([&] {
    while (auto item = swapped.Pop()) {
      absl::Status s = item->kind == Item::Kind::kFrame ? writer.WriteFrame(item->frame) : writer.WritePacket(item->packet);
      if (!s.ok()) {
        error.Set(s);
        break;
      }
      if (item->kind == Item::Kind::kFrame) progress.Done(++encoded);
    }
    if (error.Get().ok()) {
      if (absl::Status s = writer.Finish(); !s.ok()) error.Set(s);
    }
    swapped.Cancel();  // a failed writer stops the job thread's pushes
    decoded.Cancel();
  });
  while (auto item = decoded.Pop()) {
    if (item->kind == Item::Kind::kFrame) {
      if (absl::Status st = swap(item->frame); !st.ok()) {
        error.Set(st);
        break;
      }
    }
    if (!swapped.Push(*std::move(item))) break;
  }
  if (error.Get().ok()) {
    swapped.Close();  // the end of the stream: the encoder drains it and finishes the file
  } else {
    swapped.Cancel();
  }
  decoded.Cancel();  // the decoder stops at its next push if this thread left early
  decoder.join();
  encoder.join();
  *encoded_frames = encoded.load();
  return error.Get();
}

}  // namespace

absl::StatusOr<jobs::JobRunner::Output> PipelineRunner::SwapVideo(Execution& run, const std::string& source_image,
                                                                  const std::string& target,
                                                                  const v1::JobOptions& o, Output& output) {
  v1::JobResult& report = output.report;
  report.set_kind(v1::VIDEO);
  if (options_.results_dir.empty()) {
    return absl::FailedPreconditionError("video target: this fusiond has no results directory for video results");
  }
  if (o.upscale() != 0) return absl::InvalidArgumentError("options: upscale applies to image targets only, not a video");
  video::VideoInfo info;
  if (auto kind = ClassifyTarget(target, o, options_.max_pixels, &info); !kind.ok()) return kind.status();
  const DetectSettings detect = DetectSettingsFor(o);
  VideoSource source;
  if (absl::Status st = PrepareSource(run, options_, o, detect, source_image, &source); !st.ok()) return st;

  // Host admission of the stream's buffers before anything of it is allocated.
  const video::EncodeOptions enc{.crf = o.video_crf() != 0 ? static_cast<int>(o.video_crf()) : 18,
                                 .preset = o.video_preset().empty() ? "medium" : o.video_preset()};
  const std::string size = absl::StrCat(info.width, "x", info.height);
  auto decode_lease = run.HostBuffers(absl::StrCat("stage 'decode': the video decoder and the queued ", size, " frames"),
                                      video::VideoReader::DecoderHostBytes(info.width, info.height) +
                                          FrameHostBytes(info.width, info.height, options_.video_queue_frames, o.simple()));
  if (!decode_lease.ok()) return decode_lease.status();
  auto encode_lease = run.HostBuffers(absl::StrCat("stage 'encode': the H.264 encoder's ", size, " frames"),
                                      video::Mp4Writer::EncoderHostBytes(info.width, info.height, enc));
  if (!encode_lease.ok()) return encode_lease.status();
  auto reader = video::VideoReader::Open(target, "target video", {.max_pixels = options_.max_pixels, .range = RangeOf(o)});
  if (!reader.ok()) return reader.status();
  const std::string path = ResultPath(options_.results_dir, run.owner().job_id);
  const std::string tmp = path + ".tmp";
  std::vector<std::string> dropped;
  auto writer = video::Mp4Writer::Create(**reader, tmp, enc, &dropped);
  if (!writer.ok()) {
    ::unlink(tmp.c_str());
    return writer.status();
  }
  for (const std::string& d : dropped) {
    report.add_degradations(d);
    run.context().Degradation(d);
  }
  const uint64_t total = static_cast<uint64_t>(info.frames_in_range);
  FrameSwapper swapper(run, options_, o, detect,
                       FaceStages{options_.landmarks, options_.encoder, options_.generator,
                                  o.enhance_scale() != 0 ? EnhancerFor(o, o.enhance_scale()) : "", options_.blender, ""},
                       source.pictures, total, report);
  if (absl::Status st = swapper.Init(info.width, info.height); !st.ok()) return st;
  FrameProgress progress(run.context(), total);
  uint64_t encoded = 0;
  run.set_per_frame(true);
  absl::Status streamed = Stream(**reader, **writer, options_.video_queue_frames, progress,
                                 [&](video::Frame& f) { return swapper.Swap(f); }, &encoded);
  run.set_per_frame(false);
  writer->reset();  // closes the file before it is renamed or removed
  if (streamed.ok() && encoded != total) {
    streamed = absl::InvalidArgumentError(absl::StrCat("target video: ", encoded, " of ", total, " frames could be decoded"));
  }
  if (streamed.ok() && swapper.frames_swapped == 0) {
    streamed = absl::FailedPreconditionError(absl::StrCat("no face in any of the ", total, " frames of the target video"));
  }
  if (streamed.ok()) streamed = Publish(tmp, path, options_.results_dir);
  if (!streamed.ok()) {
    ::unlink(tmp.c_str());
    return streamed;
  }
  report.set_state(v1::SUCCEEDED);
  report.set_faces_swapped(static_cast<uint32_t>(swapper.faces_swapped));
  report.set_frames_total(total);
  report.set_frames_swapped(swapper.frames_swapped);
  report.set_frames_without_face(swapper.frames_without_face);
  report.set_frame_rate(info.fps);
  const double left = info.duration_s - o.start_seconds();
  report.set_duration_seconds(o.duration_seconds() > 0 ? std::min(o.duration_seconds(), left) : left);
  report.set_frames_per_second(progress.Fps(total));
  report.set_width(static_cast<uint32_t>(info.width));
  report.set_height(static_cast<uint32_t>(info.height));
  output.result_file = path;
  return std::move(output);
}

}  // namespace fusion
