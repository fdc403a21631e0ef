#include "convert.h"

namespace fusion {

const char* ToString(ServingStatus status) {
  switch (status) {
    case ServingStatus::kServing: return "SERVING";
    case ServingStatus::kNotServing: return "NOT_SERVING";
    case ServingStatus::kServiceUnknown: return "SERVICE_UNKNOWN";
    case ServingStatus::kUnknown: break;
  }
  return "UNKNOWN";
}

// The SDK's JobState is its own public type; its values are fusion.v1.JobState's, checked here,
// so the conversions (static_cast both ways) and the names (the proto's) cannot drift.
static_assert(static_cast<int>(JobState::kUnspecified) == v1::JOB_STATE_UNSPECIFIED);
static_assert(static_cast<int>(JobState::kQueued) == v1::QUEUED);
static_assert(static_cast<int>(JobState::kRunning) == v1::RUNNING);
static_assert(static_cast<int>(JobState::kSucceeded) == v1::SUCCEEDED);
static_assert(static_cast<int>(JobState::kFailed) == v1::FAILED);
static_assert(static_cast<int>(JobState::kCancelled) == v1::CANCELLED);
static_assert(v1::JobState_MAX == v1::CANCELLED, "fusion.v1.JobState has a state the SDK lacks");

static_assert(static_cast<int>(VideoDetect::kTrack) == v1::VIDEO_DETECT_TRACK);
static_assert(static_cast<int>(VideoDetect::kEveryFrame) == v1::VIDEO_DETECT_EVERY_FRAME);
static_assert(v1::VideoDetect_MAX == v1::VIDEO_DETECT_EVERY_FRAME, "fusion.v1.VideoDetect has a mode the SDK lacks");

const char* ToString(JobState state) {
  const auto proto = static_cast<v1::JobState>(state);
  if (state == JobState::kUnspecified || !v1::JobState_IsValid(proto)) return "UNSPECIFIED";
  return v1::JobState_Name(proto).c_str();  // the proto's names live as long as the program
}

const char* ToString(JobKind kind) {
  switch (kind) {
    case JobKind::kImage: return "image";
    case JobKind::kVideo: return "video";
    case JobKind::kUnspecified: break;
  }
  return "unspecified";
}

bool IsFinal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

namespace internal {

TierState FromProto(const v1::TierState& p) {
  TierState t;
  t.tier = p.tier();
  t.kind = p.kind();
  t.capacity_bytes = p.capacity_bytes();
  t.available_bytes = p.available_bytes();
  t.budget_bytes = p.budget_bytes();
  t.limit_bytes = p.limit_bytes();
  t.used_bytes = p.used_bytes();
  t.reserved_bytes = p.reserved_bytes();
  t.peak_bytes = p.peak_bytes();
  t.external_bytes = p.external_bytes();
  t.cache_bytes = p.cache_bytes();
  t.over_budget = p.over_budget();
  return t;
}

ModelStatus FromProto(const v1::ModelInfo& p) {
  ModelStatus m;
  m.name = p.name();
  m.stage = p.stage();
  m.state = p.state();
  m.tier = p.tier();
  m.bytes = p.bytes();
  m.host_bytes = p.host_bytes();
  m.pinned = p.pinned();
  m.leases = p.leases();
  m.last_use_unix_ms = p.last_use_unix_ms();
  m.loads = p.loads();
  m.uploads = p.uploads();
  m.evictions = p.evictions();
  m.hits = p.hits();
  m.misses = p.misses();
  m.one_shot = p.one_shot();
  m.tileable = p.tileable();
  if (p.has_keep_alive_seconds()) m.keep_alive_seconds = p.keep_alive_seconds();
  if (p.has_expires_in_seconds()) m.expires_in_seconds = p.expires_in_seconds();
  return m;
}

LiveSessionStatus FromProto(const v1::LiveSessionInfo& p) {
  LiveSessionStatus s;
  s.session_id = p.session_id();
  s.owner_uid = p.owner_uid();
  s.started_unix_ms = p.started_unix_ms();
  s.device = p.device();
  s.models.assign(p.models().begin(), p.models().end());
  s.model_bytes = p.model_bytes();
  s.frames_received = p.frames_received();
  s.frames_returned = p.frames_returned();
  s.frames_dropped = p.frames_dropped();
  s.latency_frames = p.latency().frames();
  s.latency_p50_ms = p.latency().p50_ms();
  s.latency_p95_ms = p.latency().p95_ms();
  s.latency_p99_ms = p.latency().p99_ms();
  return s;
}

MemoryState FromProto(const v1::MemoryState& p) {
  MemoryState s;
  s.device = FromProto(p.device());
  s.host = FromProto(p.host());
  for (const auto& m : p.models()) s.models.push_back(FromProto(m));
  for (const auto& c : p.clients()) {
    s.clients.push_back({c.uid(), c.jobs_queued(), c.jobs_running(), c.working_bytes()});
  }
  const v1::Counters& c = p.counters();
  s.counters.bytes_uploaded = c.bytes_uploaded();
  s.counters.loads = c.loads();
  s.counters.uploads = c.uploads();
  s.counters.evictions = c.evictions();
  s.counters.hits = c.hits();
  s.counters.misses = c.misses();
  s.counters.waits = c.waits();
  s.counters.refusals = c.refusals();
  s.counters.expirations = c.expirations();
  for (const auto& [step, n] : c.oom_recovered()) s.counters.oom_recovered[step] = n;
  s.unix_ms = p.unix_ms();
  for (const auto& l : p.live_sessions()) s.live_sessions.push_back(FromProto(l));
  return s;
}

JobInfo FromProto(const v1::Job& p) {
  JobInfo j;
  j.job_id = p.job_id();
  j.owner_uid = p.owner_uid();
  j.state = static_cast<JobState>(p.state());
  j.stage = p.stage();
  j.queue_position = p.queue_position();
  j.progress = p.progress();
  j.created_unix_ms = p.created_unix_ms();
  j.started_unix_ms = p.started_unix_ms();
  j.finished_unix_ms = p.finished_unix_ms();
  j.error_code = p.error_code();
  j.error_message = p.error_message();
  j.error_stage = p.error_stage();
  j.cancel_requested = p.cancel_requested();
  j.frames_done = p.frames_done();
  j.frames_total = p.frames_total();
  j.frames_per_second = p.frames_per_second();
  return j;
}

StageReport FromProto(const v1::StageReport& p) {
  static const char* kModes[] = {"", "device", "tiled", "cpu_fallback", "host"};
  StageReport r;
  r.name = p.name();
  r.model = p.model();
  r.ms = p.ms();
  r.mode = (p.mode() >= 0 && p.mode() <= 4) ? kModes[p.mode()] : "";
  r.attempts = p.attempts();
  r.tile = p.tile();
  r.upload_wait_ms = p.upload_wait_ms();
  r.peak_bytes = p.peak_bytes();
  return r;
}

JobEvent FromProto(const v1::JobEvent& p) {
  JobEvent e;
  e.job_id = p.job_id();
  e.unix_ms = p.unix_ms();
  switch (p.event_case()) {
    case v1::JobEvent::kQueued:
      e.kind = JobEvent::Kind::kQueued;
      e.queue_position = p.queued().position();
      break;
    case v1::JobEvent::kStageStarted:
      e.kind = JobEvent::Kind::kStageStarted;
      e.stage = p.stage_started().stage();
      e.progress = p.stage_started().progress();
      break;
    case v1::JobEvent::kStageFinished:
      e.kind = JobEvent::Kind::kStageFinished;
      e.report = FromProto(p.stage_finished().report());
      e.stage = e.report.name;
      e.progress = p.stage_finished().progress();
      break;
    case v1::JobEvent::kDegradation:
      e.kind = JobEvent::Kind::kDegradation;
      e.degradation = p.degradation();
      break;
    case v1::JobEvent::kFrames:
      e.kind = JobEvent::Kind::kFrames;
      e.frames_done = p.frames().frames_done();
      e.frames_total = p.frames().frames_total();
      e.frames_per_second = p.frames().frames_per_second();
      e.progress = p.frames().progress();
      break;
    default:
      e.kind = JobEvent::Kind::kDone;
      e.job = FromProto(p.done().job());
      break;
  }
  return e;
}

JobResult FromProto(const v1::JobResult& p) {
  JobResult r;
  r.job_id = p.job_id();
  r.state = static_cast<JobState>(p.state());
  r.device = p.device();
  r.faces_swapped = p.faces_swapped();
  for (const auto& f : p.faces()) {
    FaceReport face;
    for (int i = 0; i < 4 && i < f.box_size(); ++i) face.box[i] = f.box(i);
    face.identity_distance = f.identity_distance();
    face.target_identity_distance = f.target_identity_distance();
    face.score = f.score();
    r.faces.push_back(face);
  }
  for (const auto& s : p.stages()) r.stages.push_back(FromProto(s));
  for (const auto& d : p.degradations()) r.degradations.push_back(d);
  r.format = p.format() == v1::JPEG ? OutputFormat::kJpeg : OutputFormat::kPng;
  r.width = p.width();
  r.height = p.height();
  r.kind = static_cast<JobKind>(p.kind());
  r.frames_total = p.frames_total();
  r.frames_swapped = p.frames_swapped();
  r.frames_without_face = p.frames_without_face();
  r.frame_rate = p.frame_rate();
  r.duration_seconds = p.duration_seconds();
  r.frames_per_second = p.frames_per_second();
  r.frames_resumed = p.frames_resumed();
  r.chunk_frames = p.chunk_frames();
  r.identity_distance_median = p.identity_distance_median();
  r.identity_distance_worst = p.identity_distance_worst();
  r.keyframes = p.keyframes();
  r.frames_tracked = p.frames_tracked();
  r.tracks = p.tracks();
  r.flicker_ratio = p.flicker_ratio();
  return r;
}

v1::JobOptions ToProto(const SwapOptions& o) {
  v1::JobOptions p;
  p.set_ratio(o.ratio);
  p.set_enhance_scale(o.enhance_scale);
  p.set_enhance_model(o.enhance_model);
  p.set_upscale(o.upscale);
  p.set_faces(static_cast<v1::FaceSelection>(o.faces));
  if (!o.reference_image.empty()) p.mutable_reference()->set_inline_bytes(o.reference_image);
  p.set_reference_max_distance(o.reference_max_distance);
  p.set_max_side(o.max_side);
  p.set_low_vram(o.low_vram);
  p.set_min_face_px(o.min_face_px);
  p.set_min_face_score(o.min_face_score);
  p.set_simple(o.simple);
  p.set_format(static_cast<v1::OutputFormat>(o.format));
  p.set_priority(static_cast<v1::Priority>(o.priority));
  p.set_start_seconds(o.start_seconds);
  p.set_duration_seconds(o.duration_seconds);
  p.set_video_crf(o.video_crf);
  p.set_video_preset(o.video_preset);
  p.set_video_detect(static_cast<v1::VideoDetect>(o.video_detect));
  p.set_keyframe_interval(o.keyframe_interval);
  return p;
}

}  // namespace internal
}  // namespace fusion
