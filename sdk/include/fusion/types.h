// Plain value types of the fusiond SDK (no gRPC or protobuf types). Byte counts are bytes,
// times are Unix milliseconds. They mirror fusion.v1 messages in proto/fusion/v1/fusion.proto.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fusion {

// One memory tier of the daemon ("device" or "host").
struct TierState {
  std::string tier;             // "device" | "host"
  std::string kind;             // device: "cpu" | "cuda:N"; host: "host"
  uint64_t capacity_bytes = 0;  // physical size
  uint64_t available_bytes = 0; // free now
  uint64_t budget_bytes = 0;    // min(limit, free + fusiond's usage - reserve)
  uint64_t limit_bytes = 0;     // configured limit, 0 = none
  uint64_t used_bytes = 0;      // resident model bytes
  uint64_t reserved_bytes = 0;  // working sets reserved by running stages
  uint64_t peak_bytes = 0;      // high-water mark of used + reserved
  uint64_t external_bytes = 0;  // used by other processes
  uint64_t cache_bytes = 0;     // of reserved_bytes, held by the daemon's caches between jobs
  bool over_budget = false;     // pinned + leased bytes exceed the budget
};

// A catalogue model and its residency.
struct ModelStatus {
  std::string name, stage, state, tier;
  uint64_t bytes = 0;       // device bytes (measured once uploaded, else the catalogue's)
  uint64_t host_bytes = 0;  // host copy in RAM; 0 = none (dropped under the host budget)
  bool pinned = false;
  uint32_t leases = 0;
  int64_t last_use_unix_ms = 0;
  uint64_t loads = 0, uploads = 0, evictions = 0, hits = 0, misses = 0;
  bool one_shot = false, tileable = false;
  // Keep-alive (docs/MEMORY.md#keep-alive), seconds: how long the model may stay on the device
  // unused (nullopt = forever, or pinned); the time left before it leaves (set only while that
  // countdown runs: on the device, unleased, unpinned, finite keep-alive).
  std::optional<double> keep_alive_seconds, expires_in_seconds;
};

// What one client uid has in the daemon now.
struct ClientUsage {
  uint32_t uid = 0;
  uint32_t jobs_queued = 0;
  uint32_t jobs_running = 0;
  uint64_t working_bytes = 0;
};

struct MemoryCounters {
  uint64_t bytes_uploaded = 0, loads = 0, uploads = 0, evictions = 0, hits = 0, misses = 0,
           waits = 0, refusals = 0;
  uint64_t expirations = 0;  // of evictions, those whose keep-alive ran out
  std::map<std::string, uint64_t> oom_recovered;  // by ladder step
};

// An open live session (fusion.v1 LiveSessionInfo): Client::ListLiveSessions and
// MemoryState::live_sessions.
struct LiveSessionStatus {
  std::string session_id;            // "live-N", as the daemon's log names it
  uint32_t owner_uid = 0;
  int64_t started_unix_ms = 0;
  std::string device;                // its leases: empty until held (LiveSession opened)
  std::vector<std::string> models;
  uint64_t model_bytes = 0;          // the models' device bytes together
  uint64_t frames_received = 0, frames_returned = 0, frames_dropped = 0;
  // The daemon-side total_ms of its last returned frames (at most 256), nearest-rank; 0 before
  // the first result.
  uint32_t latency_frames = 0;
  double latency_p50_ms = 0, latency_p95_ms = 0, latency_p99_ms = 0;
};

struct MemoryState {
  TierState device;
  TierState host;
  std::vector<ModelStatus> models;
  std::vector<ClientUsage> clients;
  MemoryCounters counters;
  int64_t unix_ms = 0;
  // Open live sessions with their leases: the caller's own; an admin's, every uid's.
  std::vector<LiveSessionStatus> live_sessions;
};

enum class ServingStatus { kUnknown, kServing, kNotServing, kServiceUnknown };

const char* ToString(ServingStatus status);

// ---- Jobs -----------------------------------------------------------------------------------

enum class JobState { kUnspecified = 0, kQueued = 1, kRunning = 2, kSucceeded = 3, kFailed = 4, kCancelled = 5 };
const char* ToString(JobState state);  // "QUEUED", ...
bool IsFinal(JobState state);

enum class Priority { kLow = 1, kNormal = 2, kHigh = 3 };
enum class FaceSelection { kAll = 1, kLargest = 2, kReference = 3 };
enum class OutputFormat { kPng = 1, kJpeg = 2 };
enum class JobKind { kUnspecified = 0, kImage = 1, kVideo = 2 };
// Where a video job's faces come from (fusion.v1.VideoDetect; docs/USER-GUIDE.md#video).
enum class VideoDetect {
  kTrack = 1,       // detection on keyframes, faces tracked between them (the default)
  kEveryFrame = 2,  // detection on every frame
};
const char* ToString(JobKind kind);  // "image", "video"

// Options of a swap (fusion.v1.JobOptions). Pixels are pixels; 0 means "the default".
struct SwapOptions {
  float ratio = 1.0f;               // [0,1]: 0 keeps the target face, 1 the source identity
  uint32_t enhance_scale = 0;       // face-crop super-resolution: 0, 2 or 4
  std::string enhance_model;        // catalogue name; empty = default
  uint32_t upscale = 0;             // whole-frame upscale of the output: 0, 2 or 4
  FaceSelection faces = FaceSelection::kAll;
  std::string reference_image;      // encoded image for kReference
  float reference_max_distance = 0; // 0 = 0.6
  uint32_t max_side = 0;            // cap on one detection pass's input side, pixels; 0 = 1024
  bool low_vram = false;            // max_side 640
  uint32_t min_face_px = 0;         // smallest face to find, target pixels; 0 = daemon default (40)
  float min_face_score = 0;         // detector score threshold (0,1); 0 = daemon default
  bool simple = false;              // skip costly post-processing
  OutputFormat format = OutputFormat::kPng;  // images only
  Priority priority = Priority::kNormal;
  // Video targets (the job kind comes from the target's content; the result is an MP4):
  double start_seconds = 0;         // first frame's presentation time, seconds; 0 = the start
  double duration_seconds = 0;      // seconds from start_seconds; 0 = to the end
  uint32_t video_crf = 0;           // x264 CRF 1..51; 0 = 18
  std::string video_preset;         // x264 preset ultrafast..veryslow; empty = veryfast
  VideoDetect video_detect = VideoDetect::kTrack;
  uint32_t keyframe_interval = 0;   // kTrack: frames between periodic keyframes 1..300; 0 = 15
};

struct JobInfo {
  std::string job_id;
  uint32_t owner_uid = 0;
  JobState state = JobState::kUnspecified;
  std::string stage;                // current stage while RUNNING
  uint32_t queue_position = 0;      // while QUEUED, 0 = next
  float progress = 0;               // [0,1]
  int64_t created_unix_ms = 0, started_unix_ms = 0, finished_unix_ms = 0;
  int32_t error_code = 0;           // absl/gRPC status code of a FAILED or CANCELLED job
  std::string error_message;
  std::string error_stage;          // the stage a FAILED or CANCELLED job ended in ("" before any)
  bool cancel_requested = false;    // while RUNNING: cancelled at its next face/tile/stage
  uint64_t frames_done = 0, frames_total = 0;  // a RUNNING video job's frames (0 for images)
  double frames_per_second = 0;     // a RUNNING video job's frames processed per second
};

struct StageReport {
  std::string name, model;
  double ms = 0;
  std::string mode;                 // "device" | "tiled" | "cpu_fallback" | "host"
  uint32_t attempts = 0;
  uint32_t tile = 0;                // tile side in pixels when tiled
  double upload_wait_ms = 0;
  uint64_t peak_bytes = 0;
};

struct FaceReport {
  float box[4] = {0, 0, 0, 0};      // x, y, w, h in target pixels
  float identity_distance = 0;      // descriptor distance of the result face to the source
  float target_identity_distance = 0;  // the target face before the swap to the source
  float score = 0;                  // the detector's confidence in the box, 0..1
};

struct JobResult {
  std::string job_id;
  JobState state = JobState::kUnspecified;
  std::string device;               // "cpu", "cuda:0"
  uint32_t faces_swapped = 0;
  std::vector<FaceReport> faces;
  std::vector<StageReport> stages;
  std::vector<std::string> degradations;
  std::string image;                // encoded result: the PNG/JPEG image, or the video's MP4
  bool image_by_memfd = false;      // how the image travelled
  OutputFormat format = OutputFormat::kPng;
  uint32_t width = 0, height = 0;
  JobKind kind = JobKind::kUnspecified;
  // Video jobs (faces_swapped is then the sum over frames and faces is empty):
  uint64_t frames_total = 0;        // frames of the job's range, all in the result
  uint64_t frames_swapped = 0;      // frames with a face swapped
  uint64_t frames_without_face = 0; // frames passed through unchanged
  double frame_rate = 0;            // the target's frame rate, frames per second
  double duration_seconds = 0;      // the result's duration
  double frames_per_second = 0;     // frames processed per second
  uint64_t frames_resumed = 0;      // frames kept from an interrupted run's committed chunks
  uint64_t chunk_frames = 0;        // frames per committed chunk (the resume unit)
  double identity_distance_median = 0;  // source vs swapped face, over all swapped faces
  double identity_distance_worst = 0;   // the largest of them
  uint64_t keyframes = 0;           // frames the detector scanned
  uint64_t frames_tracked = 0;      // frames whose faces came from tracks alone
  uint64_t tracks = 0;              // face tracks started
  double flicker_ratio = 0;         // tracked faces' change in the output over the input's; 0 = none followed
};

// One progress event of WatchJob.
struct JobEvent {
  enum class Kind { kQueued, kStageStarted, kStageFinished, kDegradation, kDone, kFrames };
  Kind kind = Kind::kQueued;
  std::string job_id;
  int64_t unix_ms = 0;
  uint32_t queue_position = 0;      // kQueued
  std::string stage;                // kStageStarted / kStageFinished
  float progress = 0;               // kStageStarted / kStageFinished / kFrames
  uint64_t frames_done = 0, frames_total = 0;  // kFrames (video jobs)
  double frames_per_second = 0;     // kFrames
  StageReport report;               // kStageFinished
  std::string degradation;          // kDegradation
  JobInfo job;                      // kDone: the final job
};

}  // namespace fusion
