// VideoReader: a streaming decoder of a video target held in memory (FFmpeg's libavformat,
// libavcodec, libswscale): frames as BGR images with their timestamps, and the packets of the
// file's other streams (audio, subtitles) untouched, in file order, for a stream copy.
//
// Range: only frames (and other streams' packets) whose presentation time lies in
// [start_s, start_s + duration_s) of the video's timeline (from its first frame) come out, and
// their timestamps are shifted by the start (start 0: timestamps exactly as in the file).
// Memory: one decoded frame and its BGR copy at a time, plus the decoder's reference frames
// (about DecoderHostBytes()); independent of the video's length.
// Errors: Open as ProbeVideo's (INVALID_ARGUMENT naming `what`); Next: INVALID_ARGUMENT for
// data the decoder rejects ("target video: damaged: frame 31 cannot be decoded")
// or a frame whose size differs from the stream's; INTERNAL for a failed conversion.
// Thread-safety: one thread at a time (the video job's decode thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <opencv2/core.hpp>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "video/video_probe.h"

struct AVPacket;
struct AVFrame;
struct AVCodecContext;
struct SwsContext;

namespace fusion::video {

namespace internal {
class MemoryDemuxer;
}

struct Frame {
  cv::Mat bgr;           // CV_8UC3 BGR, VideoReader::width() x height(): upright as players show it
  int64_t pts = 0;       // presentation time, video stream time base, shifted by the range start
  int64_t duration = 0;  // same unit; 0 if unknown
  int64_t index = 0;     // 0-based among the frames of the range
};

// A packet of a non-video stream, owned (moved, never copied).
class Packet {
 public:
  Packet();
  ~Packet();
  Packet(Packet&& other) noexcept;
  Packet& operator=(Packet&& other) noexcept;
  bool empty() const { return p_ == nullptr; }
  int stream_index() const;
  absl::string_view data() const;
  AVPacket* get() const { return p_; }

 private:
  friend class VideoReader;
  AVPacket* p_ = nullptr;
};

struct Item {
  enum class Kind { kFrame, kPacket };
  Kind kind = Kind::kFrame;
  Frame frame;
  Packet packet;
};

class VideoReader {
 public:
  struct Options {
    uint64_t max_pixels = 100'000'000;
    FrameRange range;
    // false: the video stream's packets are dropped undecoded and Next returns only the other
    // streams' packets (the remux of a video job's segments, video/segment_join.h).
    bool decode_video = true;
  };
  // `bytes` must outlive the reader.
  static absl::StatusOr<std::unique_ptr<VideoReader>> Open(absl::string_view bytes, const std::string& what,
                                                          const Options& options);
  ~VideoReader();

  // The next frame of the range or packet of another stream; false at the end.
  absl::StatusOr<bool> Next(Item* item);

  // The frames' size as they come out: upright (the stream's display matrix applied).
  int width() const { return rotation_ % 180 == 0 ? width_ : height_; }
  int height() const { return rotation_ % 180 == 0 ? height_ : width_; }
  int rotation() const { return rotation_; }  // VideoInfo::rotation
  // Host bytes the decoder itself holds (reference and threading frames), an estimate from the
  // frame size: 24 frames of 1.5 B/px (YUV 4:2:0) plus the current one's BGR copy (3 B/px), and
  // for a rotated stream the stored-orientation BGR it is turned from (3 B/px more).
  static uint64_t DecoderHostBytes(int width, int height, bool rotated = false);
  // `pts` (a Frame's) in seconds of the output timeline.
  double PtsSeconds(int64_t pts) const;
  // The type ("audio", "subtitle", ...) of stream `index` (a Packet's stream_index()).
  std::string StreamType(int index) const;
  const internal::MemoryDemuxer& demuxer() const { return *demuxer_; }

 private:
  VideoReader() = default;
  absl::StatusOr<bool> ReceiveFrame(Item* item);
  absl::Status Convert(const AVFrame* f, int64_t pts, Frame* out);
  bool InRange(int64_t pts, int stream) const;
  int64_t Shift(int stream) const;

  std::unique_ptr<internal::MemoryDemuxer> demuxer_;
  std::string what_;
  Options options_;
  AVCodecContext* dec_ = nullptr;
  AVFrame* frame_ = nullptr;
  AVPacket* pkt_ = nullptr;
  SwsContext* sws_ = nullptr;
  int width_ = 0, height_ = 0;  // as stored (coded)
  int rotation_ = 0;
  cv::Mat stored_;              // a rotated stream's frame before it is turned upright
  int64_t origin_ = 0;  // the video stream's start time, its time base
  int64_t decoded_ = 0, emitted_ = 0, next_pts_ = 0;
  bool flushing_ = false, done_ = false;
};

}  // namespace fusion::video
