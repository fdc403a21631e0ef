// ProbeVideo: what a video target holds, read from its container and packets without decoding
// a frame (FFmpeg's libavformat; daemon/video/av_input.h). SubmitJob and the video job use it.
//
// It refuses, with INVALID_ARGUMENT naming `what` ("target video: ..."): bytes that are no
// container fusiond reads (MP4/MOV, MKV/WebM, AVI, YUV4MPEG), a file without a video stream,
// a frame size over `max_pixels` (checked from the header, before any frame exists), a video
// with no frames, and a truncated or damaged file (packets whose data lies past the end, fewer
// packets than the container declares, streams that all end well before the duration its header
// declares, a packet FFmpeg cannot read).
// Cost: demuxes every packet once (no decoding): ~1 ms per MB; memory: FFmpeg's demuxer state
// (the MP4 sample index: ~20 B per frame), never a decoded frame.
// Thread-safety: a free function; calls may run concurrently.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace fusion::video {

struct StreamInfo {
  int index = 0;
  std::string type;   // "video", "audio", "subtitle", "data", "attachment"
  std::string codec;  // FFmpeg's codec name: "h264", "aac", "opus", "mov_text", ...
  bool mp4_carries = false;  // the MP4 muxer can hold it unchanged (stream copy)
};

struct VideoInfo {
  std::string container;        // FFmpeg's demuxer name, e.g. "mov,mp4,m4a,3gp,3g2,mj2"
  std::string codec;            // the video stream's codec
  int video_stream = 0;         // index of the video stream
  int width = 0, height = 0;    // frame size as shown (after `rotation`), pixels
  int rotation = 0;             // clockwise degrees the stored frames are turned to show upright
  double fps = 0;               // average frame rate, frames per second (0 if unknown)
  double duration_s = 0;        // the video stream's duration, seconds
  int64_t frames = 0;           // video packets (= frames) in the file
  int64_t frames_in_range = 0;  // of them, with a presentation time in [start, start+duration)
  std::vector<StreamInfo> streams;  // every stream, the video one included
};

// A frame range in seconds of the video's presentation time (from its first frame).
struct FrameRange {
  double start_s = 0;
  double duration_s = 0;  // 0 = to the end
};

absl::StatusOr<VideoInfo> ProbeVideo(absl::string_view bytes, const std::string& what, uint64_t max_pixels,
                                     FrameRange range = {});

// True when `bytes` start like a container ProbeVideo may read (ISO BMFF 'ftyp', EBML, RIFF
// AVI, YUV4MPEG2): a cheap first look that decides which error a non-image target gets.
bool LooksLikeVideoContainer(absl::string_view bytes);

}  // namespace fusion::video
