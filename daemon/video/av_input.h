// Internal to daemon/video (not a public header): FFmpeg's demuxer over a file held in memory,
// and FFmpeg error codes turned into absl::Status. Includes libav headers; only the video TUs
// include it.
// Safety: the demuxer reads only the given bytes (custom AVIO, no protocols: a playlist or a
// reference to another file cannot make FFmpeg open anything) and only the container formats
// of kFormatWhitelist. Decoders are opened with max_pixels, so a header cannot make FFmpeg
// allocate a frame larger than the limit.
// Thread-safety: one MemoryDemuxer per thread at a time.
#pragma once

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
}

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fusion::video::internal {

// Containers fusiond reads: MP4/MOV/3GP, Matroska/WebM, AVI, and YUV4MPEG (raw test clips).
// libswscale flags for the YUV <-> BGR conversions: accurate rounding and full-resolution
// chroma, so that decode -> BGR -> encode keeps a colour (without them a flat grey 128 came back
// as 123,126,124: the fast paths truncate).
inline constexpr int kSwsFlags = 2 /*SWS_BILINEAR*/ | 0x40000 /*SWS_ACCURATE_RND*/ | 0x2000 /*SWS_FULL_CHR_H_INT*/ |
                                 0x4000 /*SWS_FULL_CHR_H_INP*/;

inline constexpr char kFormatWhitelist[] = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,yuv4mpegpipe";

// Clockwise degrees (0, 90, 180 or 270) that turn the stream's decoded frames the way players
// show them: its display matrix (a phone's portrait clip is stored sideways with "rotate 90"),
// rounded to a quarter turn; 0 without one. A mirrored matrix is read as its rotation only.
int UprightRotation(const AVStream* stream);

// FFmpeg's text for `err` (av_strerror).
std::string AvErrorText(int err);
// "<what>: <doing>" with `code`. FFmpeg's own words (AvErrorText) go to the daemon's log, not to
// the client: they name FFmpeg's internals, not the input ("Invalid data found when processing
// input" for a cut file and for a damaged one alike).
absl::Status AvError(absl::StatusCode code, absl::string_view what, absl::string_view doing, int err);

class MemoryDemuxer {
 public:
  // Opens `bytes` (which must outlive the demuxer) as a container, reads its stream
  // information and picks the video stream. INVALID_ARGUMENT naming `what`: not a container
  // FFmpeg reads, no video stream, a frame size of 0 or over `max_pixels` (checked from the
  // container header before any frame is decoded, and again after the codec headers).
  static absl::StatusOr<std::unique_ptr<MemoryDemuxer>> Open(absl::string_view bytes, const std::string& what,
                                                            uint64_t max_pixels);
  ~MemoryDemuxer();
  MemoryDemuxer(const MemoryDemuxer&) = delete;
  MemoryDemuxer& operator=(const MemoryDemuxer&) = delete;

  AVFormatContext* ctx() const { return fmt_; }
  AVStream* video() const { return fmt_->streams[video_index_]; }
  int video_index() const { return video_index_; }
  uint64_t size() const { return cursor_.size; }
  const std::string& what() const { return what_; }

 private:
  struct Cursor {
    const uint8_t* data = nullptr;
    uint64_t size = 0;
    uint64_t pos = 0;
  };
  MemoryDemuxer() = default;
  static int Read(void* opaque, uint8_t* buf, int n);
  static int64_t Seek(void* opaque, int64_t offset, int whence);

  Cursor cursor_;
  std::string what_;
  AVIOContext* avio_ = nullptr;
  AVFormatContext* fmt_ = nullptr;
  int video_index_ = -1;
};

// Whether fusiond copies a stream of `codec` into its MP4 results unchanged: the audio codecs
// MP4 players read (AAC, MP3, MP2, AC-3, E-AC-3, Opus, FLAC, ALAC) and mov_text subtitles.
// FFmpeg's muxer would also store e.g. Vorbis (a private object type no player reads): those
// are dropped instead, reported as a degradation.
bool Mp4Carries(AVCodecID codec);

// Adds to `out` (an MP4 muxer before its header) a copy of every stream of `in` other than the
// video stream (and attached pictures) that Mp4Carries; the rest are named in `degradations`.
// `stream_map` gets, per stream of `in`, its output index or -1. RESOURCE_EXHAUSTED: no memory.
absl::Status AddCopiedStreams(const MemoryDemuxer& in, AVFormatContext* out, std::vector<int>* stream_map,
                              std::vector<std::string>* degradations);

// FFmpeg's own log lines go to the daemon's log at debug level (never to stderr, never into a
// status message). Idempotent; called by every entry point of daemon/video.
void RouteFfmpegLog();

// Checks a frame size against the pixel limit: INVALID_ARGUMENT naming `what` and the numbers.
absl::Status CheckFrameSize(const std::string& what, int width, int height, uint64_t max_pixels);

}  // namespace fusion::video::internal
