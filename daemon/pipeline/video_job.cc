// PipelineRunner::SwapVideo: a video target through the one pipeline (pipeline_runner.h,
// docs/ARCHITECTURE.md#the-life-of-a-video-frame). No LibTorch in this TU.
//
//   decode thread                    job thread                           encode thread
//   VideoReader::Next --[queue N]--> VideoFaces (detect or track)  --[queue N]--> ChunkEncoder
//   (the range's frames; frames      -> steady -> generate/blend/score    (H.264, one segment
//    of committed chunks dropped)     (Execution per-frame mode)           file per chunk)
//
// Chunks and resume: frames are encoded in chunks of video_chunk_frames, each chunk by its own
// libx264 encoder into its own segment file, committed when the chunk is done
// (video/segment_store.h: counts and file renamed into <results>/<job>.parts/). A job that
// runs again after a crash (kill -9, power loss; the journal requeues it RUNNING -> QUEUED)
// keeps the committed chunks and starts at the first frame after them: at most the one chunk
// in flight is redone, never a committed frame. The frames before it are still decoded (cheap
// next to a swap) but not swapped or encoded. At the end the segments are joined with the
// target's audio/subtitle packets copied unchanged (video/segment_join.h): a remux.
// Every chunk starts with an IDR frame (a new encoder), and the face tracking's state after a
// chunk's last frame (its tracks and their point filters, video_checkpoint.proto) is committed
// with the chunk and restored by a resumed run, so an uninterrupted and a resumed run encode
// exactly the same chunks: same frames, same timestamps.
//
// The source face is detected, landmarked and encoded once, before the first frame. The
// target's faces come from VideoFaces (video_faces.h: keyframes scanned by the detector, tracks
// between them, faces traced back from the keyframe that finds them), so the job thread holds
// up to keyframe_interval + 1 decoded frames until their faces are final. Each track's points
// are steadied over time (geometry::OneEuroPoints) before the per-face stages; every
// kScoreEvery-th frame is scored. Frames without a face (or, for REFERENCE, none within the
// distance) pass through unchanged and are counted. Memory: both queues hold at most N frames each; the decoder, encoder, queued frames
// and one frame's working copies are admitted on the host tier before the threads start
// (FrameHostBytes), so RAM does not grow with the video's length. Cancellation is checked
// before every frame and inside its stages (checkpoints), so a cancel ends within one frame.
// The result is written to <results_dir>/<job>.mp4.tmp, fsynced and renamed to <job>.mp4; the
// segments are removed then, and when the job fails or is cancelled by its owner (not when the
// daemon stops: the job runs again and resumes).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <cstdio>
#include <algorithm>
#include <functional>
#include <filesystem>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"
#include "common/bounded_queue.h"
#include "common/mutex.h"
#include "common/thread_priority.h"
#include "pipeline/execution.h"
#include "pipeline/face_swap.h"
#include "pipeline/frame_swapper.h"
#include "geometry/frame_edge.h"
#include "pipeline/pipeline_runner.h"
#include "pipeline/target_kind.h"
#include "pipeline/video_faces.h"
#include "pipeline/video_checkpoint.h"
#include "geometry/face_track.h"
#include "absl/container/flat_hash_map.h"
#include <opencv2/imgproc.hpp>
#include <deque>
#include <optional>
#include "video/mp4_writer.h"
#include "video/segment_join.h"
#include "video/segment_store.h"
#include "video/fsync_path.h"
#include "fusion_status.h"
#include "video/video_reader.h"
#include "base/status_macros.h"

namespace fusion {
namespace {

using video::Item;
using video::SegmentCounts;

struct SwappedFrame {
  video::Frame frame;
  FrameOutcome outcome;
  std::string tracker_state;  // a chunk's last frame: the tracking's state after it (serialized)
};

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
  // `resumed`: frames done before this run (committed chunks), not counted in the rate.
  FrameProgress(jobs::JobRunner::Context& ctx, uint64_t total, uint64_t resumed)
      : ctx_(ctx), total_(total), resumed_(resumed), start_(absl::Now()) {}
  void Done(uint64_t done) {
    const absl::Time now = absl::Now();
    if (done != total_ && now - last_ < absl::Milliseconds(250)) return;
    last_ = now;
    ctx_.FramesDone(done, total_, Fps(done));
  }
  double Fps(uint64_t done) const {
    const double s = absl::ToDoubleSeconds(absl::Now() - start_);
    return s > 0 ? static_cast<double>(done - std::min(done, resumed_)) / s : 0;
  }

 private:
  jobs::JobRunner::Context& ctx_;
  const uint64_t total_, resumed_;
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
  video::FsyncPath(dir, /*directory=*/true);  // best effort: the result is in place either way
  return absl::OkStatus();
}

// Host bytes of the video job's frames: the frames the queues and the three threads hold (BGR,
// 3 B/px each) and the job thread's working copies of one frame: its RGB picture and the blend's
// working frame (3 B/px each) and, simple mode, the blend attempt's copy (3 B/px).
// Tracking holds `analysed` frames with their RGB copies (6 B/px) until their faces are final
// (VideoFaces::HeldFrames), and the swap keeps the frame before, input and output, for the
// flicker sums (3 B/px each).
uint64_t FrameHostBytes(int w, int h, size_t queue_frames, size_t analysed, bool simple) {
  const uint64_t px = static_cast<uint64_t>(w) * static_cast<uint64_t>(h);
  const uint64_t held = 2 * queue_frames + 3;
  return px * 3 * held + px * (simple ? 9 : 6) + px * 6 * analysed + px * 3 * 2;
}

// Frames from one periodic keyframe to the next (VideoDetect TRACK, keyframe_interval 0).
constexpr int kKeyframeInterval = 15;

// The encode thread's end: frames into chunk segments of `chunk` frames, each its own libx264
// encoder and segment file, committed to `store` when full (the last one at Finish).
class ChunkEncoder {
 public:
  ChunkEncoder(const video::VideoReader& reader, video::SegmentStore& store, video::EncodeOptions enc, size_t chunk)
      : reader_(reader), store_(store), enc_(std::move(enc)), chunk_(chunk) {}

  absl::Status Write(const SwappedFrame& f) {
    if (writer_ == nullptr) {
      ASSIGN_OR_RETURN(writer_, video::Mp4Writer::CreateVideoOnly(reader_, store_.TempPath(store_.committed().size()), enc_));
    }
    RETURN_IF_ERROR(writer_->WriteFrame(f.frame));
    ++counts_.frames;
    if (!f.tracker_state.empty()) counts_.tracker_state = f.tracker_state;
    if (f.outcome.swapped) {
      ++counts_.frames_swapped;
      counts_.faces_swapped += f.outcome.faces;
    } else {
      ++counts_.frames_without_face;
    }
    counts_.identity_distances.insert(counts_.identity_distances.end(), f.outcome.identity_distances.begin(),
                                      f.outcome.identity_distances.end());
    counts_.keyframes += f.outcome.keyframe ? 1 : 0;
    counts_.frames_tracked += f.outcome.tracked ? 1 : 0;
    counts_.tracks += f.outcome.tracks_started;
    counts_.flicker_input += f.outcome.flicker_input;
    counts_.flicker_output += f.outcome.flicker_output;
    return counts_.frames == chunk_ ? Commit() : absl::OkStatus();
  }
  absl::Status Finish() { return writer_ != nullptr ? Commit() : absl::OkStatus(); }

 private:
  absl::Status Commit() {
    absl::Status st = writer_->Finish();
    writer_.reset();  // one encoder at a time (the host lease covers one)
    if (st.ok()) st = store_.Commit(counts_);
    counts_ = SegmentCounts();
    return st;
  }

  const video::VideoReader& reader_;
  video::SegmentStore& store_;
  const video::EncodeOptions enc_;
  const size_t chunk_;
  std::unique_ptr<video::Mp4Writer> writer_;
  SegmentCounts counts_;
};

// The calling thread at nice 19. The encode thread runs so: x264's worker threads, made when
// each chunk's encoder opens, are the job's own, and encoding is the one part of a video that
// need not keep pace with the device: while a live frame or another job's stage runs, the
// scheduler gives them the cores first (what it costs a video alone:
// docs/PERFORMANCE.md#live-sessions). The job's own thread runs at the job workers' nice
// (JobManager::Options::worker_nice).
void LowerThisThreadsPriority() {
  if (const int err = SetThisThreadsNice(19); err != 0) {
    spdlog::debug("video encode thread: cannot lower its priority (errno {})", err);
  }
}

// decode thread -> [decoded] -> `swap` on this thread -> [swapped] -> encode thread (nice 19). Frames
// before `first` (committed chunks of an earlier run) are dropped by the decode thread, and so
// are the other streams' packets (the join copies them). Returns the first error of the three
// (CANCELLED included) or OK with every frame encoded and the last chunk committed; frames
// still queued after an error are dropped unencoded. *encoded: `first` + frames encoded.
// `process` takes each decoded frame in order (nullopt once at the end of the stream) and
// appends the frames it has finished to its output, in order.
using ProcessFn = std::function<absl::Status(std::optional<video::Frame>, std::vector<SwappedFrame>*)>;
absl::Status Stream(video::VideoReader& reader, ChunkEncoder& sink, size_t queue_frames, uint64_t first,
                    FrameProgress& progress, const ProcessFn& process, uint64_t* encoded_frames) {
  BoundedQueue<video::Frame> decoded(queue_frames);
  BoundedQueue<SwappedFrame> swapped(queue_frames);
  FirstError error;
  std::atomic<uint64_t> encoded{first};
  std::thread decoder([&] {
    for (;;) {
      Item item;
      auto more = reader.Next(&item);
      if (!more.ok()) error.Set(WithStage(more.status(), "decode"));
      if (!more.ok() || !*more) break;
      if (item.kind != Item::Kind::kFrame || static_cast<uint64_t>(item.frame.index) < first) continue;
      if (!decoded.Push(std::move(item.frame))) break;
    }
    decoded.Close();
  });
  std::thread encoder([&] {
    LowerThisThreadsPriority();
    while (auto f = swapped.Pop()) {
      if (absl::Status s = sink.Write(*f); !s.ok()) {
        error.Set(WithStage(s, "encode"));
        break;
      }
      progress.Done(++encoded);
    }
    if (error.Get().ok()) {
      if (absl::Status s = sink.Finish(); !s.ok()) error.Set(WithStage(s, "encode"));
    }
    swapped.Cancel();  // a failed writer stops the job thread's pushes
    decoded.Cancel();
  });
  std::vector<SwappedFrame> done;
  const auto send = [&](absl::Status st) {
    if (!st.ok()) error.Set(st);
    for (SwappedFrame& f : done) {
      if (!st.ok() || !swapped.Push(std::move(f))) return false;
    }
    done.clear();
    return st.ok();
  };
  bool going = true;
  while (auto frame = decoded.Pop()) {
    if (!(going = send(process(std::move(frame), &done)))) break;
  }
  if (going && error.Get().ok()) send(process(std::nullopt, &done));
  if (error.Get().ok()) {
    swapped.Close();  // the end of the stream: the encoder drains it and commits the last chunk
  } else {
    swapped.Cancel();
  }
  decoded.Cancel();  // the decoder stops at its next push if this thread left early
  decoder.join();
  encoder.join();
  *encoded_frames = encoded.load();
  return error.Get();
}

// The chunks' counts added up.
SegmentCounts SumOf(const std::vector<SegmentCounts>& chunks) {
  SegmentCounts sum;
  for (const SegmentCounts& c : chunks) {
    sum.frames += c.frames;
    sum.frames_swapped += c.frames_swapped;
    sum.frames_without_face += c.frames_without_face;
    sum.faces_swapped += c.faces_swapped;
    sum.identity_distances.insert(sum.identity_distances.end(), c.identity_distances.begin(), c.identity_distances.end());
    sum.keyframes += c.keyframes;
    sum.frames_tracked += c.frames_tracked;
    sum.tracks += c.tracks;
    sum.flicker_input += c.flicker_input;
    sum.flicker_output += c.flicker_output;
  }
  return sum;
}

// The job's counts into its report: faces and frames, tracking, flicker, identity median/worst.
void ReportCounts(SegmentCounts sum, v1::JobResult& report) {
  report.set_faces_swapped(static_cast<uint32_t>(sum.faces_swapped));
  report.set_frames_swapped(sum.frames_swapped);
  report.set_frames_without_face(sum.frames_without_face);
  report.set_keyframes(sum.keyframes);
  report.set_frames_tracked(sum.frames_tracked);
  report.set_tracks(sum.tracks);
  report.set_flicker_ratio(sum.flicker_input > 0 ? sum.flicker_output / sum.flicker_input : 0);
  if (!sum.identity_distances.empty()) {
    std::vector<float>& d = sum.identity_distances;
    std::sort(d.begin(), d.end());
    report.set_identity_distance_median(d[d.size() / 2]);
    report.set_identity_distance_worst(d.back());
  }
}

// Where the job's faces come from (JobOptions' video_detect, keyframe_interval, faces).
VideoFaces::Settings TrackingSettings(const v1::JobOptions& o, size_t chunk, uint64_t total, const VideoSource& source) {
  return {.every_frame = o.video_detect() == v1::VIDEO_DETECT_EVERY_FRAME,
          .interval = o.keyframe_interval() != 0 ? static_cast<int>(o.keyframe_interval()) : kKeyframeInterval,
          .chunk = chunk,
          .total = total,
          .reference = o.faces() == v1::REFERENCE ? &source.pictures[1] : nullptr,
          .reference_limit = o.reference_max_distance() > 0 ? o.reference_max_distance() : 0.6f};
}

// The tracking's state after frame `index` (a chunk's last), serialized for the chunk's commit.
std::string TrackerState(uint64_t index, const VideoFaces& analysis, const FrameSwapper& swapper) {
  internal::VideoTrackerState state;
  state.set_frame(index);
  analysis.SaveState(&state);
  swapper.SaveFilters(&state);
  return state.SerializeAsString();
}

// A resumed job's tracks and filters as the uninterrupted run had them after the last committed
// chunk. Without a state that fits (a chunk of another build), the first frame starts afresh.
void ResumeTracking(const SegmentCounts& last, uint64_t resumed, const std::string& job, VideoFaces& analysis,
                    FrameSwapper& swapper) {
  internal::VideoTrackerState state;
  const bool fits = !last.tracker_state.empty() && state.ParseFromString(last.tracker_state) &&
                    state.frame() + 1 == resumed && analysis.RestoreState(state) && swapper.RestoreFilters(state);
  if (!fits) spdlog::warn("job {}: the tracking state of its last chunk does not fit: tracks start afresh", job);
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
  const std::string path = ResultPath(options_.results_dir, run.owner().job_id);
  const std::string tmp = path + ".tmp";
  const std::string parts = path.substr(0, path.size() - 4) + ".parts";
  // The job's segments go when it ends here, whatever the end, except when the daemon is
  // stopping (the job runs again at the next start and resumes from them). A crash skips this.
  absl::Cleanup remove_parts = [&] {
    std::error_code ec;
    if (!run.context().Interrupted()) std::filesystem::remove_all(parts, ec);
  };
  // The container opened for decoding (the plan classified it at submit).
  ASSIGN_OR_RETURN(auto probe, video::ProbeVideo(target, "target video", options_.max_pixels, RangeOf(o)));
  const video::VideoInfo& info = probe;
  const DetectSettings detect = DetectSettingsFor(o);
  VideoSource source;
  RETURN_IF_ERROR(PrepareSource(run, options_, o, detect, source_image, &source));

  // Host admission of the stream's buffers before anything of it is allocated.
  const video::EncodeOptions enc{.crf = o.video_crf() != 0 ? static_cast<int>(o.video_crf()) : 18,
                                 .preset = o.video_preset().empty() ? video::kDefaultPreset : o.video_preset()};
  const std::string size = absl::StrCat(info.width, "x", info.height);
  const uint64_t total = static_cast<uint64_t>(info.frames_in_range);
  const size_t chunk = std::max<size_t>(options_.video_chunk_frames, 1);
  VideoFaces analysis(run, options_.detector, options_.landmarks, options_.encoder, detect,
                      TrackingSettings(o, chunk, total, source));
  RETURN_IF_ERROR(analysis.Init(info.width, info.height));
  ASSIGN_OR_RETURN(auto decode_lease, run.HostBuffers(absl::StrCat("stage 'decode': the video decoder and the queued ", size, " frames"),
                                      video::VideoReader::DecoderHostBytes(info.width, info.height, info.rotation != 0) +
                                          FrameHostBytes(info.width, info.height, options_.video_queue_frames,
                                                         analysis.HeldFrames(), o.simple())));
  ASSIGN_OR_RETURN(auto encode_lease, run.HostBuffers(absl::StrCat("stage 'encode': the H.264 encoder's ", size, " frames"),
                                      video::Mp4Writer::EncoderHostBytes(info.width, info.height, enc)));
  ASSIGN_OR_RETURN(auto reader, video::VideoReader::Open(target, "target video", {.max_pixels = options_.max_pixels, .range = RangeOf(o)}));
  ASSIGN_OR_RETURN(auto store, video::SegmentStore::Open(parts));
  const uint64_t resumed = std::min<uint64_t>(store.frames_committed(), total);
  if (resumed > 0) {
    spdlog::info("job {}: resuming at frame {} of {} ({} committed chunks of an interrupted run)",
                 run.owner().job_id, resumed + 1, total, store.committed().size());
  }
  FrameSwapper swapper(run, o,
                       FaceStages{options_.landmarks, options_.encoder, options_.generator,
                                  o.enhance_scale() != 0 ? EnhancerFor(o, o.enhance_scale()) : "", options_.blender, "",
                                  JobThreads()},
                       source.pictures, options_.max_faces, info.fps, total, chunk, report);
  if (resumed > 0) ResumeTracking(store.committed().back(), resumed, run.owner().job_id, analysis, swapper);
  FrameProgress progress(run.context(), total, resumed);
  ChunkEncoder sink(*reader, store, enc, chunk);
  uint64_t encoded = 0;
  run.set_per_frame(true);
  std::deque<AnalysedFrame> ready;
  const ProcessFn process = [&](std::optional<video::Frame> f, std::vector<SwappedFrame>* out) -> absl::Status {
    if (f.has_value()) {
      RETURN_IF_ERROR(analysis.Push(*std::move(f), &ready));
    } else {
      analysis.Finish(&ready);
    }
    for (; !ready.empty(); ready.pop_front()) {
      SwappedFrame s;
      RETURN_IF_ERROR(swapper.Swap(ready.front(), &s.outcome));
      s.frame = std::move(ready.front().frame);
      const uint64_t i = static_cast<uint64_t>(s.frame.index);
      if (i % chunk == chunk - 1 || i + 1 == total) s.tracker_state = TrackerState(i, analysis, swapper);
      out->push_back(std::move(s));
    }
    return absl::OkStatus();
  };
  absl::Status streamed = Stream(*reader, sink, options_.video_queue_frames, resumed, progress, process, &encoded);
  run.set_per_frame(false);
  reader.reset();
  SegmentCounts sum = SumOf(store.committed());
  if (streamed.ok() && (encoded != total || sum.frames != total)) {
    streamed = WithStage(absl::InvalidArgumentError(absl::StrCat("target video: ", encoded, " of ", total, " frames could be decoded")),
                         "decode");
  }
  if (streamed.ok() && sum.frames_swapped == 0) {
    streamed = WithStage(
        absl::FailedPreconditionError(absl::StrCat("no face in any of the ", total, " frames of the target video")), "detect");
  }
  // The join: the segments and the target's other streams (their packets only, undecoded).
  std::vector<std::string> dropped;
  if (streamed.ok()) {
    auto packets = video::VideoReader::Open(
        target, "target video", {.max_pixels = options_.max_pixels, .range = RangeOf(o), .decode_video = false});
    streamed = packets.ok() ? video::JoinSegments(store.Paths(), **packets, tmp, &dropped) : packets.status();
  }
  if (streamed.ok()) streamed = Publish(tmp, path, options_.results_dir);
  if (!streamed.ok()) {
    ::unlink(tmp.c_str());
    return streamed;
  }
  std::error_code ec;
  std::filesystem::remove_all(parts, ec);  // published: also when the daemon is stopping meanwhile
  for (const std::string& d : dropped) {
    report.add_degradations(d);
    run.context().Degradation(d);
  }
  report.set_state(v1::SUCCEEDED);
  ReportCounts(std::move(sum), report);
  report.set_frames_total(total);
  report.set_frames_resumed(resumed);
  report.set_chunk_frames(chunk);
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
