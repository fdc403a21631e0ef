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
  // The source (and reference) image: decoded, detected, landmarked and encoded once.
  Lease source_buffers, reference_buffers;
  auto source = AdmittedDecode(run, source_image, "source image", options_.max_pixels, 3, &source_buffers);
  if (!source.ok()) return source.status();
  const bool by_reference = o.faces() == v1::REFERENCE;
  absl::StatusOr<DecodedImage> reference = DecodedImage{};
  if (by_reference) {
    reference = AdmittedDecode(run, o.reference().inline_bytes(), "reference image", options_.max_pixels, 3,
                               &reference_buffers);
    if (!reference.ok()) return reference.status();
  }
  std::vector<Picture> fixed;  // [source, reference?]
  for (auto [img, what] : {std::pair{&*source, "source image"}, std::pair{&*reference, "reference image"}}) {
    if (img->bgr.empty()) continue;
    auto p = MakePicture(img->bgr, what);
    if (!p.ok()) return p.status();
    fixed.push_back(*std::move(p));
  }
  const DetectSettings detect = DetectSettingsFor(o);
  const FaceStages stages{options_.landmarks, options_.encoder, options_.generator,
                          o.enhance_scale() != 0 ? EnhancerFor(o, o.enhance_scale()) : "", options_.blender, ""};
  int side = 0;
  for (const Picture& p : fixed) {
    auto s = LargestDetectInput(options_.detector, p.rgb.cols, p.rgb.rows, detect);
    if (!s.ok()) return s.status();
    side = std::max(side, *s);
  }
  absl::Status st = run.Stage("detect", options_.detector, uint64_t(side) * side, absl::StrCat(side, "x", side), 0.01f,
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
  st = run.Stage("landmarks", options_.landmarks, 112 * 112, "112x112", 0.02f,
                 [&](const ModelCopy& c, int, const Checkpoint& cp) {
                   for (Picture& p : fixed) {
                     if (absl::Status s = FindLandmarks(c, p, cp.Within(p.what)); !s.ok()) return s;
                   }
                   return absl::OkStatus();
                 });
  if (!st.ok()) return st;
  st = run.Stage("encode", options_.encoder, 150 * 150, "150x150", 0.03f, [&](const ModelCopy& c, int, const Checkpoint& cp) {
    for (Picture& p : fixed) {
      if (absl::Status s = DescribeFaces(c, p, {}, cp.Within(p.what)); !s.ok()) return s;
    }
    return absl::OkStatus();
  });
  if (!st.ok()) return st;

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

  auto frame_side = LargestDetectInput(options_.detector, info.width, info.height, detect);
  if (!frame_side.ok()) return frame_side.status();
  const uint64_t frame_detect_px = uint64_t(*frame_side) * *frame_side;
  const std::string frame_bucket = absl::StrCat(*frame_side, "x", *frame_side);
  const uint64_t total = static_cast<uint64_t>(info.frames_in_range);
  BoundedQueue<Item> decoded(options_.video_queue_frames), swapped(options_.video_queue_frames);
  FirstError error;
  FrameProgress progress(run.context(), total);
  std::atomic<uint64_t> encoded{0};
  std::thread decoder([&] {
    for (;;) {
      Item item;
      auto more = (*reader)->Next(&item);
      if (!more.ok()) error.Set(more.status());
      if (!more.ok() || !*more || !decoded.Push(std::move(item))) break;
    }
    decoded.Close();
  });
  std::thread encoder([&] {
    while (auto item = swapped.Pop()) {
      absl::Status s = item->kind == Item::Kind::kFrame ? (*writer)->WriteFrame(item->frame)
                                                         : (*writer)->WritePacket(item->packet);
      if (!s.ok()) {
        error.Set(s);
        break;
      }
      if (item->kind == Item::Kind::kFrame) progress.Done(++encoded);
    }
    if (error.Get().ok()) {
      if (absl::Status s = (*writer)->Finish(); !s.ok()) error.Set(s);
    }
    swapped.Cancel();  // a failed writer stops the job thread's pushes
    decoded.Cancel();
  });

  run.set_per_frame(true);
  uint64_t frames_swapped = 0, frames_without_face = 0, faces_swapped = 0;
  while (auto item = decoded.Pop()) {
    if (item->kind == Item::Kind::kPacket) {
      if (!swapped.Push(*std::move(item))) break;
      continue;
    }
    video::Frame& frame = item->frame;
    const std::string what = absl::StrCat("target video frame ", frame.index + 1, " of ", total);
    if (run.context().Cancelled()) {
      error.Set(absl::CancelledError(absl::StrCat("job cancelled at frame ", frame.index + 1, " of ", total)));
      break;
    }
    auto tgt = MakePicture(frame.bgr, what);
    if (!tgt.ok()) {
      error.Set(tgt.status());
      break;
    }
    std::vector<Picture> pics = {fixed[0], *std::move(tgt)};
    if (by_reference) pics.push_back(fixed[1]);
    st = run.Stage("detect", options_.detector, frame_detect_px, frame_bucket, 0.05f,
                   [&](const ModelCopy& m, int tile, const Checkpoint& cp) {
                     return DetectFaces(m, tile, detect, pics[1], cp.Within(what));
                   });
    if (st.ok() && !pics[1].faces.empty()) {
      if (o.faces() == v1::LARGEST) pics[1].faces = {pics[1].faces[LargestFace(pics[1].faces)]};
      if (pics[1].faces.size() > options_.max_faces) pics[1].faces.resize(options_.max_faces);
      cv::Mat result;
      st = SwapFaces(stages, o, pics, run, report, &result, FaceWork{.source_ready = true, .score = false});
      if (st.ok() && report.faces_swapped() > 0) {
        frame.bgr = result;
        ++frames_swapped;
        faces_swapped += report.faces_swapped();
      } else if (st.ok()) {
        ++frames_without_face;
      }
    } else if (st.ok()) {
      ++frames_without_face;
    }
    if (!st.ok()) {
      error.Set(st);
      break;
    }
    if (!swapped.Push(*std::move(item))) break;
  }
  // The end of the stream, or on a failure or cancel, the frames still queued dropped unencoded.
  if (error.Get().ok()) {
    swapped.Close();
  } else {
    swapped.Cancel();
  }
  decoded.Cancel();  // the decoder stops at its next push if the job thread left early
  decoder.join();
  encoder.join();
  run.set_per_frame(false);
  writer->reset();  // closes the file before it is renamed or removed
  if (absl::Status failed = error.Get(); !failed.ok()) {
    ::unlink(tmp.c_str());
    return failed;
  }
  if (encoded.load() != total) {
    ::unlink(tmp.c_str());
    return absl::InvalidArgumentError(absl::StrCat("target video: ", encoded.load(), " of ", total,
                                                   " frames could be decoded"));
  }
  if (frames_swapped == 0) {
    ::unlink(tmp.c_str());
    return absl::FailedPreconditionError(absl::StrCat("no face in any of the ", total, " frames of the target video"));
  }
  if (absl::Status s = Publish(tmp, path, options_.results_dir); !s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  report.set_state(v1::SUCCEEDED);
  report.set_faces_swapped(static_cast<uint32_t>(faces_swapped));
  report.set_frames_total(total);
  report.set_frames_swapped(frames_swapped);
  report.set_frames_without_face(frames_without_face);
  report.set_frame_rate(info.fps);
  report.set_duration_seconds(o.duration_seconds() > 0 ? std::min(o.duration_seconds(), info.duration_s - o.start_seconds())
                                                        : info.duration_s - o.start_seconds());
  report.set_frames_per_second(progress.Fps(total));
  report.set_width(static_cast<uint32_t>(info.width));
  report.set_height(static_cast<uint32_t>(info.height));
  output.result_file = path;
  return std::move(output);
}

}  // namespace fusion
