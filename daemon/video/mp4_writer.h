// Mp4Writer: encodes a stream of BGR frames to an MP4 file with H.264 (libx264 through
// libavcodec) at the reader's frame size, time base and timestamps (variable frame rate kept:
// every frame keeps its own pts and duration), and copies the reader's other streams into it
// unchanged (no re-encode) when MP4 players read them (AAC, MP3, MP2, AC-3, E-AC-3, Opus, FLAC,
// ALAC, mov_text). Any other stream (Vorbis, ASS, SubRip, ...) is dropped and named in
// `degradations` (transcoding it to AAC is not built yet).
// Memory: the encoder's lookahead and reference frames, about EncoderHostBytes(); one frame's
// YUV copy at a time.
// Errors: INTERNAL naming the stage and the file ("stage 'encode': cannot open libx264 for
// <path>"; FFmpeg's words in the log); RESOURCE_EXHAUSTED when the disk is full.
// The file is complete only after Finish() (trailer written, data fsynced); the caller gives it
// its final name. Destroying an unfinished writer closes the file, leaving it partial.
// Thread-safety: one thread at a time (the video job's encode thread).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "video/video_reader.h"

struct AVFormatContext;
struct AVCodecContext;
struct AVFrame;
struct AVPacket;
struct SwsContext;

namespace fusion::video {

// x264's preset when a job names none: veryfast, as FaceFusion's default output preset. On a
// 1080p face clip it costs 28 ms of CPU a frame against medium's 63 ms (a 2-core machine spends
// that beside the swap), for files about as large at the same crf (docs/PERFORMANCE.md).
inline constexpr char kDefaultPreset[] = "veryfast";

struct EncodeOptions {
  int crf = 18;                   // x264 constant rate factor, 0..51 (lower = better, larger)
  std::string preset = kDefaultPreset;  // x264 preset: ultrafast .. veryslow
  int lookahead_frames = 20;      // x264 rc-lookahead: frames it holds before encoding one
};

// The video stream of an MP4 made without a reader (fusionctl live from a camera): frames of
// width x height (CV_8UC3), their pts in time_base_num/time_base_den seconds, fps_num/fps_den
// frames a second (the stream's nominal rate).
struct VideoShape {
  int width = 0, height = 0;
  int time_base_num = 1, time_base_den = 1000000;
  int fps_num = 30, fps_den = 1;
};

class Mp4Writer {
 public:
  // Creates `path` (truncating it) for the streams of `reader`.
  static absl::StatusOr<std::unique_ptr<Mp4Writer>> Create(const VideoReader& reader, const std::string& path,
                                                          const EncodeOptions& options,
                                                          std::vector<std::string>* degradations);
  // The video stream alone (a chunk's segment file of a video job, video/segment_join.h):
  // WritePacket drops every packet.
  static absl::StatusOr<std::unique_ptr<Mp4Writer>> CreateVideoOnly(const VideoReader& reader, const std::string& path,
                                                                   const EncodeOptions& options);
  // The video stream alone, of `shape` (no reader: WritePacket drops every packet).
  static absl::StatusOr<std::unique_ptr<Mp4Writer>> CreateVideoOnly(const VideoShape& shape, const std::string& path,
                                                                   const EncodeOptions& options);
  ~Mp4Writer();

  absl::Status WriteFrame(const Frame& frame);  // frame.bgr: the reader's size, CV_8UC3
  absl::Status WritePacket(Packet& packet);     // a packet of the reader's other streams
  absl::Status Finish();                        // flush, trailer, close, fsync

  // The encoder's host bytes for w x h frames: lookahead + B-frames + references + threads
  // frames of YUV (1.5 B/px, 4:4:4 for odd sizes: 3 B/px), twice (x264's half-res planes and
  // its lookahead copies), plus the conversion frame.
  static uint64_t EncoderHostBytes(int width, int height, const EncodeOptions& options);

 private:
  Mp4Writer() = default;
  // `reader` may be null (then the stream is `shape`'s alone); with it, `shape` is the reader's.
  static absl::StatusOr<std::unique_ptr<Mp4Writer>> Create(const VideoShape& shape, const VideoReader* reader,
                                                          const std::string& path, const EncodeOptions& options,
                                                          bool copy_other_streams,
                                                          std::vector<std::string>* degradations);
  absl::Status Drain(bool flushing);

  std::string path_;
  AVFormatContext* out_ = nullptr;
  AVCodecContext* enc_ = nullptr;
  AVFrame* yuv_ = nullptr;
  AVPacket* pkt_ = nullptr;
  SwsContext* sws_ = nullptr;
  int video_out_ = 0;
  std::vector<int> stream_map_;                 // reader stream -> output stream, -1 dropped
  std::vector<std::pair<int, int>> in_tb_;      // reader stream time bases (num, den)
  std::map<int64_t, int64_t> durations_;        // pts -> duration of frames inside the encoder
  bool header_written_ = false, finished_ = false;
};

}  // namespace fusion::video
