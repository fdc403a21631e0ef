#include "format.h"

#include "absl/strings/str_format.h"

#include <optional>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/size.h"

namespace fusion::ctl {
namespace {

nlohmann::json TierToJson(const TierState& t) {
  return {{"tier", t.tier},
          {"kind", t.kind},
          {"capacity_bytes", t.capacity_bytes},
          {"available_bytes", t.available_bytes},
          {"budget_bytes", t.budget_bytes},
          {"limit_bytes", t.limit_bytes},
          {"used_bytes", t.used_bytes},
          {"reserved_bytes", t.reserved_bytes},
          {"peak_bytes", t.peak_bytes},
          {"external_bytes", t.external_bytes},
          {"over_budget", t.over_budget},
          {"cache_bytes", t.cache_bytes}};
}

void TierLine(std::ostringstream& out, const TierState& t) {
  out << t.tier << " (" << t.kind << "): budget " << FormatBytes(t.budget_bytes) << ", used "
      << FormatBytes(t.used_bytes) << ", reserved " << FormatBytes(t.reserved_bytes)
      << (t.cache_bytes == 0 ? "" : absl::StrCat(" (face cache ", FormatBytes(t.cache_bytes), ")")) << ", peak "
      << FormatBytes(t.peak_bytes) << ", available " << FormatBytes(t.available_bytes) << " of "
      << FormatBytes(t.capacity_bytes) << ", others use " << FormatBytes(t.external_bytes)
      << (t.over_budget ? "  OVER BUDGET" : "") << "\n";
}

// A JSON number, or null for nullopt.
nlohmann::json OrNull(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

// "  expires in 42s" while the model's keep-alive counts down, else nothing.
std::string ExpiryText(const ModelStatus& m) {
  return m.expires_in_seconds ? absl::StrFormat("  expires in %.0fs", *m.expires_in_seconds) : "";
}

// "  host copy 4.0 MiB" when the model's weights are in the host tier, else nothing.
std::string HostCopyText(const ModelStatus& m) {
  return m.host_bytes == 0 ? "" : absl::StrCat("  host copy ", FormatBytes(m.host_bytes));
}

}  // namespace

nlohmann::json ModelToJson(const ModelStatus& m) {
  return {{"name", m.name},         {"stage", m.stage},         {"state", m.state},
          {"tier", m.tier},         {"bytes", m.bytes},         {"host_bytes", m.host_bytes},
          {"pinned", m.pinned},
          {"leases", m.leases},     {"last_use", m.last_use_unix_ms}, {"loads", m.loads},
          {"uploads", m.uploads},   {"evictions", m.evictions}, {"hits", m.hits},
          {"misses", m.misses},     {"one_shot", m.one_shot},   {"tileable", m.tileable},
          {"keep_alive_seconds", OrNull(m.keep_alive_seconds)},
          {"expires_in_seconds", OrNull(m.expires_in_seconds)}};
}

std::string ModelToText(const ModelStatus& m) {
  return absl::StrCat(m.name, "  ", m.stage, "  ", m.state, "  ", m.tier, "  ", FormatBytes(m.bytes),
                      HostCopyText(m), m.pinned ? "  pinned" : "", "  leases ", m.leases, ExpiryText(m));
}

nlohmann::json MemoryStateToJson(const MemoryState& s) {
  nlohmann::json models = nlohmann::json::array();
  for (const ModelStatus& m : s.models) {
    models.push_back({{"name", m.name}, {"stage", m.stage}, {"state", m.state}, {"tier", m.tier},
                      {"bytes", m.bytes}, {"host_bytes", m.host_bytes}, {"pinned", m.pinned},
                      {"leases", m.leases},
                      {"last_use", m.last_use_unix_ms}, {"loads", m.loads},
                      {"uploads", m.uploads}, {"evictions", m.evictions}, {"hits", m.hits},
                      {"misses", m.misses}, {"keep_alive_seconds", OrNull(m.keep_alive_seconds)},
                      {"expires_in_seconds", OrNull(m.expires_in_seconds)}});
  }
  nlohmann::json clients = nlohmann::json::array();
  for (const ClientUsage& c : s.clients) {
    clients.push_back({{"uid", c.uid}, {"jobs_queued", c.jobs_queued},
                       {"jobs_running", c.jobs_running}, {"working_bytes", c.working_bytes}});
  }
  nlohmann::json live = nlohmann::json::array();
  for (const LiveSessionStatus& l : s.live_sessions) live.push_back(LiveSessionToJson(l));
  const MemoryCounters& c = s.counters;
  nlohmann::json counters = {{"bytes_uploaded", c.bytes_uploaded}, {"loads", c.loads},
                             {"uploads", c.uploads},               {"evictions", c.evictions},
                             {"hits", c.hits},                     {"misses", c.misses},
                             {"waits", c.waits},                   {"refusals", c.refusals},
                             {"expirations", c.expirations},       {"oom_recovered", c.oom_recovered}};
  return {{"device", TierToJson(s.device)}, {"host", TierToJson(s.host)},
          {"models", models},               {"clients", clients},
          {"counters", counters},           {"unix_ms", s.unix_ms},
          {"live_sessions", live}};
}

std::string MemoryStateToText(const MemoryState& s) {
  std::ostringstream out;
  TierLine(out, s.device);
  TierLine(out, s.host);
  if (s.models.empty()) out << "models: none resident\n";
  for (const ModelStatus& m : s.models) {
    out << "  " << m.name << "  " << m.state << "  " << m.tier << "  " << FormatBytes(m.bytes)
        << HostCopyText(m) << (m.pinned ? "  pinned" : "") << "  leases " << m.leases << ExpiryText(m) << "\n";
  }
  for (const ClientUsage& c : s.clients) {
    out << "uid " << c.uid << ": " << c.jobs_queued << " queued, " << c.jobs_running
        << " running, working set " << FormatBytes(c.working_bytes) << "\n";
  }
  for (const LiveSessionStatus& l : s.live_sessions) out << "uid " << l.owner_uid << ": " << LiveSessionToText(l) << "\n";
  out << "uploads " << s.counters.uploads << " (" << FormatBytes(s.counters.bytes_uploaded)
      << "), evictions " << s.counters.evictions << " (keep-alive " << s.counters.expirations << "), refusals "
      << s.counters.refusals << "\n";
  return out.str();
}

nlohmann::json JobToJson(const JobInfo& j) {
  return {{"job_id", j.job_id},          {"owner_uid", j.owner_uid},
          {"state", ToString(j.state)},   {"stage", j.stage},
          {"queue_position", j.queue_position}, {"progress", j.progress},
          {"created_unix_ms", j.created_unix_ms}, {"started_unix_ms", j.started_unix_ms},
          {"finished_unix_ms", j.finished_unix_ms}, {"error_code", j.error_code},
          {"error_message", j.error_message}, {"error_stage", j.error_stage},
          {"cancel_requested", j.cancel_requested},
          {"frames_done", j.frames_done}, {"frames_total", j.frames_total},
          {"frames_per_second", j.frames_per_second}};
}

nlohmann::json LiveSessionToJson(const LiveSessionStatus& l) {
  return {{"kind", "live_session"},
          {"session_id", l.session_id},
          {"owner_uid", l.owner_uid},
          {"state", "LIVE"},
          {"started_unix_ms", l.started_unix_ms},
          {"device", l.device},
          {"models", l.models},
          {"model_bytes", l.model_bytes},
          {"frames_received", l.frames_received},
          {"frames_returned", l.frames_returned},
          {"frames_dropped", l.frames_dropped},
          {"latency",
           {{"frames", l.latency_frames},
            {"p50_ms", l.latency_p50_ms},
            {"p95_ms", l.latency_p95_ms},
            {"p99_ms", l.latency_p99_ms}}}};
}

std::string LiveSessionToText(const LiveSessionStatus& l) {
  std::string out = absl::StrCat(l.session_id, "  LIVE  frames ", l.frames_received, " in, ", l.frames_returned,
                                 " out, ", l.frames_dropped, " dropped");
  if (l.latency_frames > 0) {
    absl::StrAppend(&out, absl::StrFormat("  latency p50 %.1f ms p95 %.1f ms p99 %.1f ms", l.latency_p50_ms,
                                          l.latency_p95_ms, l.latency_p99_ms));
  }
  absl::StrAppend(&out, l.models.empty() ? "  opening (no leases yet)"
                                         : absl::StrCat("  leases ", l.models.size(), " models ",
                                                        FormatBytes(l.model_bytes)));
  return out;
}

std::string JobToText(const JobInfo& j) {
  std::ostringstream out;
  out << j.job_id << "  " << ToString(j.state);
  if (j.state == JobState::kQueued) out << "  position " << j.queue_position;
  if (j.state == JobState::kRunning) out << "  " << j.stage << " " << static_cast<int>(100 * j.progress) << "%";
  if (j.state == JobState::kRunning && j.frames_total > 0) {
    out << "  frame " << j.frames_done << " of " << j.frames_total << " (" << absl::StrFormat("%.1f", j.frames_per_second)
        << " fps)";
  }
  if (j.state == JobState::kRunning && j.cancel_requested) out << "  (cancel requested)";
  if (!j.error_message.empty()) out << "  " << j.error_message;
  return out.str();
}

nlohmann::json JobResultToJson(const JobResult& r) {
  nlohmann::json faces = nlohmann::json::array();
  for (const FaceReport& f : r.faces) {
    faces.push_back({{"box", {f.box[0], f.box[1], f.box[2], f.box[3]}},
                     {"identity_distance", f.identity_distance},
                     {"target_identity_distance", f.target_identity_distance},
                     {"score", f.score}});
  }
  nlohmann::json stages = nlohmann::json::array();
  for (const StageReport& s : r.stages) {
    stages.push_back({{"name", s.name}, {"model", s.model}, {"ms", s.ms}, {"mode", s.mode},
                      {"attempts", s.attempts}, {"tile", s.tile},
                      {"upload_wait_ms", s.upload_wait_ms}, {"peak_bytes", s.peak_bytes}});
  }
  nlohmann::json j = {{"job_id", r.job_id},   {"state", ToString(r.state)}, {"device", r.device},
                      {"kind", ToString(r.kind)},
                      {"faces_swapped", r.faces_swapped}, {"faces", faces}, {"stages", stages},
                      {"degradations", r.degradations}, {"width", r.width}, {"height", r.height},
                      {"image_bytes", r.image.size()}, {"image_by_memfd", r.image_by_memfd}};
  if (r.kind == JobKind::kVideo) {
    j["frames_total"] = r.frames_total;
    j["frames_swapped"] = r.frames_swapped;
    j["frames_without_face"] = r.frames_without_face;
    j["frame_rate"] = r.frame_rate;
    j["duration_seconds"] = r.duration_seconds;
    j["frames_per_second"] = r.frames_per_second;
    j["frames_resumed"] = r.frames_resumed;
    j["keyframes"] = r.keyframes;
    j["frames_tracked"] = r.frames_tracked;
    j["tracks"] = r.tracks;
    j["flicker_ratio"] = r.flicker_ratio;
    j["chunk_frames"] = r.chunk_frames;
    j["identity_distance_median"] = r.identity_distance_median;
    j["identity_distance_worst"] = r.identity_distance_worst;
  }
  return j;
}

}  // namespace fusion::ctl
