// fusionctl live: a live session (fusion.v1 Live) fed from a video file or a V4L2 camera. A file
// is decoded here (FFmpeg's libraries through fusion_video, the daemon's own reader and writer:
// no LibTorch), every frame sent as raw BGR at the file's frame rate or --pace F frames/s; a
// camera (--input names a character device: v4l2_io.h) is read through libavdevice and its
// frames sent as it gives them, until it ends or Ctrl-C/SIGTERM (then the session ends as after
// the last frame of a file). The swapped frames go to OUT.mp4 (H.264, ultrafast, at their input
// timestamps: frames the daemon dropped leave gaps; a file's other streams, its audio, copied as
// they are) or, when --output names a character device, to that v4l2loopback device (rawvideo
// YUV 4:2:0). The MP4 is written to a hidden file beside OUT and renamed to OUT once closed: when
// the session fails after frames came back, those frames are kept (a playable file); when none
// did, an existing OUT is untouched. Frames in/out/dropped and the latency (send -> result
// received) are printed: percentiles p50/p95/p99, nearest rank; with --json one object on stdout,
// with "error" (code, message, stage) when the session failed. The video library's log goes to
// stderr at warning level.
// Exit codes: 0 ok; 2 for a source, input or output path that cannot be used (a missing
// /dev/videoN, a character device that is not V4L2: the message names it) or the daemon
// unreachable; 1 for the session's errors.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "fusion/client.h"

namespace fusion::ctl {

struct LiveArgs {
  std::string source, input, output;
  double pace = 0;  // frames/s; 0 = the file's frame rate
  bool json = false, simple = false;
  uint32_t keyframe_interval = 0;
};

void AddLiveOptions(CLI::App* cmd, LiveArgs& args);
// Runs `live`; the process exit code (above).
int RunLive(Client& client, const LiveArgs& args);

}  // namespace fusion::ctl
