// fusionctl live: a live session (fusion.v1 Live) fed from a video file. The file is decoded
// here (FFmpeg's libraries through fusion_video, the daemon's own reader and writer: no
// LibTorch), every frame sent as raw BGR at the file's frame rate or --pace F frames/s, the
// swapped frames written to OUT.mp4 (H.264, ultrafast, at their input timestamps: frames the
// daemon dropped leave gaps), and frames in/out/dropped and the latency (send -> result
// received) printed: percentiles p50/p95/p99, nearest rank.
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
// Runs `live`; the process exit code (0 ok, 1 failure, 2 unreachable/usage).
int RunLive(Client& client, const LiveArgs& args);

}  // namespace fusion::ctl
