// fusionctl output: JSON (byte counts as JSON numbers) and human-readable text.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "fusion/types.h"

namespace fusion::ctl {

nlohmann::json MemoryStateToJson(const MemoryState& state);
std::string MemoryStateToText(const MemoryState& state);
// One catalogue model: name, stage, state, tier, bytes, host_bytes, pinned, leases, last_use,
// loads, uploads, evictions, hits, misses, one_shot, tileable, keep_alive_seconds and
// expires_in_seconds (null = forever or pinned; null = no countdown running).
nlohmann::json ModelToJson(const ModelStatus& model);
// "name  stage  STATE  tier  bytes  [host copy BYTES]  [pinned]  leases N  [expires in Ss]".
std::string ModelToText(const ModelStatus& model);
nlohmann::json JobToJson(const JobInfo& job);
// An open live session: kind "live_session", session_id, owner_uid, state "LIVE",
// started_unix_ms, device, models, model_bytes, frames_received, frames_returned, frames_dropped,
// latency {frames, p50_ms, p95_ms, p99_ms}. `fusionctl jobs --json` lists these after the jobs;
// `fusionctl mem --json` under "live_sessions".
nlohmann::json LiveSessionToJson(const LiveSessionStatus& session);
// "live-3  LIVE  frames 120 in, 118 out, 2 dropped  latency p50 41.0 ms p95 55.2 ms p99 60.1 ms
// leases 4 models 21.3 MiB".
std::string LiveSessionToText(const LiveSessionStatus& session);
std::string JobToText(const JobInfo& job);
// The job report (docs/USER-GUIDE.md#swap---json-the-job-report): job_id, state, device,
// faces_swapped, faces[{box, identity_distance, target_identity_distance, score}],
// stages[{name, ms, mode, attempts, tile, upload_wait_ms, peak_bytes}], degradations; a video's
// also frames_total .. frames_per_second, frames_resumed, keyframes, frames_tracked, tracks,
// flicker_ratio, chunk_frames, identity_distance_median/_worst.
nlohmann::json JobResultToJson(const JobResult& result);

}  // namespace fusion::ctl
