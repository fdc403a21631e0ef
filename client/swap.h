// fusionctl job commands: swap, jobs, job, cancel, result.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "fusion/client.h"

namespace fusion::ctl {

struct SwapArgs {
  std::string source, target, output;
  float ratio = 1.0f;
  std::string enhance = "none";   // none|x2|x4
  std::string upscale;            // x2|x4
  std::string faces = "all";      // all|largest|reference:IMG
  uint32_t max_side = 0;
  uint32_t min_face_px = 0;     // 0 = the daemon's default
  float min_face_score = 0;     // 0 = the daemon's default
  bool low_vram = false, simple = false, json = false, no_wait = false;
  std::string format, priority = "normal";  // format "" = from OUT's extension (.jpg/.jpeg), else png
  double start = 0, duration = 0;   // video targets: frame range, seconds
  uint32_t crf = 0;                 // video targets: x264 CRF (0 = 18)
  std::string preset;               // video targets: x264 preset ("" = veryfast)
  std::string video_detect;         // video targets: track|every-frame ("" = track)
  uint32_t keyframe_interval = 0;   // video targets, track: 1..300 (0 = 15)
};

// Registers the swap options on `cmd`.
void AddSwapOptions(CLI::App* cmd, SwapArgs& args);
// Runs `swap`; returns the process exit code (0 ok, 1 failure, 2 unreachable/usage).
int RunSwap(Client& client, const SwapArgs& args);
int RunJobs(Client& client, bool json, bool all_uids);
int RunJob(Client& client, const std::string& id, bool json);
int RunCancel(Client& client, const std::string& id, bool json);
// Fetches a SUCCEEDED job's result and writes its image to `output`.
int RunResult(Client& client, const std::string& id, const std::string& output, bool json);

// Prints a status the fusionctl way and returns its exit code.
int Fail(const absl::Status& status);

}  // namespace fusion::ctl
