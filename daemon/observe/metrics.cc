#include "observe/metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace fusion {
namespace {

std::string ModeName(v1::StageMode mode) {
  switch (mode) {
    case v1::DEVICE: return "device";
    case v1::TILED: return "tiled";
    case v1::CPU_FALLBACK: return "cpu_fallback";
    case v1::HOST: return "host";
    default: return "unspecified";
  }
}

// A label value with Prometheus' escapes (backslash, quote, newline).
std::string Label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

void Family(std::string& out, const char* name, const char* type, const char* help) {
  absl::StrAppend(&out, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

void Metrics::OnJobEvent(const v1::JobEvent& event) {
  if (event.has_stage_finished()) {
    const v1::StageReport& r = event.stage_finished().report();
    const double seconds = r.ms() / 1000.0;
    MutexLock lock(&mu_);
    Histogram& h = stages_[{r.name(), ModeName(r.mode())}];
    for (size_t i = 0; i < kStageBuckets.size(); ++i) {
      if (seconds <= kStageBuckets[i]) {
        ++h.buckets[i];
        break;
      }
    }
    ++h.count;
    h.sum += seconds;
  } else if (event.has_done()) {
    const v1::JobState state = event.done().job().state();
    if (state != v1::SUCCEEDED && state != v1::FAILED && state != v1::CANCELLED) return;
    MutexLock lock(&mu_);
    ++jobs_[v1::JobState_Name(state)];
  }
}

void Metrics::OnLiveFrameReceived() {
  MutexLock lock(&mu_);
  ++live_.received;
}

void Metrics::OnLiveFrameDropped() {
  MutexLock lock(&mu_);
  ++live_.dropped;
}

void Metrics::OnLiveFrameReturned(double total_ms) {
  const double seconds = total_ms / 1000.0;
  MutexLock lock(&mu_);
  for (size_t i = 0; i < kLiveBuckets.size(); ++i) {
    if (seconds <= kLiveBuckets[i]) {
      ++live_.buckets[i];
      break;
    }
  }
  ++live_.returned;
  live_.sum_seconds += seconds;
}

std::string Metrics::Exposition(const v1::MemoryState& s) const {
  std::string out;
  auto gauge = [&](const char* name, const char* help, uint64_t v) {
    Family(out, name, "gauge", help);
    absl::StrAppend(&out, name, " ", v, "\n");
  };
  gauge("fusiond_device_budget_bytes", "Device tier budget (min of limit and free + fusiond's usage - reserve).",
        s.device().budget_bytes());
  gauge("fusiond_device_used_bytes", "Device bytes held by resident models.", s.device().used_bytes());
  gauge("fusiond_device_reserved_bytes", "Device working sets reserved by running stages.", s.device().reserved_bytes());
  gauge("fusiond_host_budget_bytes", "Host tier budget.", s.host().budget_bytes());
  gauge("fusiond_host_used_bytes", "Host bytes held by model copies in RAM.", s.host().used_bytes());

  Family(out, "fusiond_model_resident_bytes", "gauge", "Bytes of a model's resident copy, per tier.");
  for (const v1::ModelInfo& m : s.models()) {
    if (m.tier() == "device") absl::StrAppend(&out, "fusiond_model_resident_bytes{model=\"", Label(m.name()), "\",tier=\"device\"} ", m.bytes(), "\n");
    if (m.host_bytes() > 0) absl::StrAppend(&out, "fusiond_model_resident_bytes{model=\"", Label(m.name()), "\",tier=\"host\"} ", m.host_bytes(), "\n");
  }
  Family(out, "fusiond_model_expires_in_seconds", "gauge",
         "Seconds until an unused model's keep-alive runs out and it leaves the device (only while that counts down).");
  for (const v1::ModelInfo& m : s.models()) {
    if (m.has_expires_in_seconds()) {
      absl::StrAppend(&out, "fusiond_model_expires_in_seconds{model=\"", Label(m.name()), "\"} ",
                      absl::StrFormat("%.3f", m.expires_in_seconds()), "\n");
    }
  }
  Family(out, "fusiond_bytes_uploaded_total", "counter", "Bytes uploaded from the host tier to the device.");
  absl::StrAppend(&out, "fusiond_bytes_uploaded_total ", s.counters().bytes_uploaded(), "\n");
  Family(out, "fusiond_uploads_total", "counter", "Host-to-device uploads per model.");
  for (const v1::ModelInfo& m : s.models()) absl::StrAppend(&out, "fusiond_uploads_total{model=\"", Label(m.name()), "\"} ", m.uploads(), "\n");
  Family(out, "fusiond_evictions_total", "counter", "Device evictions per model.");
  for (const v1::ModelInfo& m : s.models()) absl::StrAppend(&out, "fusiond_evictions_total{model=\"", Label(m.name()), "\"} ", m.evictions(), "\n");
  Family(out, "fusiond_keep_alive_expirations_total", "counter", "Of device evictions, those whose keep-alive ran out.");
  absl::StrAppend(&out, "fusiond_keep_alive_expirations_total ", s.counters().expirations(), "\n");
  Family(out, "fusiond_oom_recovered_total", "counter", "OOM ladder outcomes by step.");
  for (const char* step : {"evict_retry", "tiled", "cpu_fallback", "failed"}) {
    const auto it = s.counters().oom_recovered().find(step);
    absl::StrAppend(&out, "fusiond_oom_recovered_total{step=\"", step, "\"} ",
                    it == s.counters().oom_recovered().end() ? 0 : it->second, "\n");
  }
  Family(out, "fusiond_queue_depth", "gauge", "Jobs queued per uid.");
  for (const v1::ClientUsage& c : s.clients()) absl::StrAppend(&out, "fusiond_queue_depth{uid=\"", c.uid(), "\"} ", c.jobs_queued(), "\n");
  Family(out, "fusiond_jobs_running", "gauge", "Jobs running per uid.");
  for (const v1::ClientUsage& c : s.clients()) absl::StrAppend(&out, "fusiond_jobs_running{uid=\"", c.uid(), "\"} ", c.jobs_running(), "\n");

  std::map<uint32_t, std::pair<uint64_t, uint64_t>> live_by_uid;  // sessions, leased bytes
  for (const v1::LiveSessionInfo& l : s.live_sessions()) {
    ++live_by_uid[l.owner_uid()].first;
    live_by_uid[l.owner_uid()].second += l.model_bytes();
  }
  Family(out, "fusiond_live_sessions", "gauge", "Live sessions open per uid.");
  for (const auto& [uid, n] : live_by_uid) absl::StrAppend(&out, "fusiond_live_sessions{uid=\"", uid, "\"} ", n.first, "\n");
  Family(out, "fusiond_live_leased_bytes", "gauge",
         "Device bytes of the models the open live sessions of a uid hold leased.");
  for (const auto& [uid, n] : live_by_uid) {
    absl::StrAppend(&out, "fusiond_live_leased_bytes{uid=\"", uid, "\"} ", n.second, "\n");
  }

  MutexLock lock(&mu_);
  Family(out, "fusiond_live_frames_received_total", "counter", "Frames live sessions received since start.");
  absl::StrAppend(&out, "fusiond_live_frames_received_total ", live_.received, "\n");
  Family(out, "fusiond_live_frames_returned_total", "counter", "Frames live sessions swapped and returned since start.");
  absl::StrAppend(&out, "fusiond_live_frames_returned_total ", live_.returned, "\n");
  Family(out, "fusiond_live_frames_dropped_total", "counter",
         "Frames live sessions dropped since start (a newer frame came while they waited).");
  absl::StrAppend(&out, "fusiond_live_frames_dropped_total ", live_.dropped, "\n");
  Family(out, "fusiond_live_frame_seconds", "histogram",
         "Live frame latency in the daemon, seconds: received to result sent.");
  uint64_t live_cumulative = 0;
  for (size_t i = 0; i < kLiveBuckets.size(); ++i) {
    live_cumulative += live_.buckets[i];
    absl::StrAppend(&out, "fusiond_live_frame_seconds_bucket{le=\"", absl::StrFormat("%g", kLiveBuckets[i]), "\"} ",
                    live_cumulative, "\n");
  }
  absl::StrAppend(&out, "fusiond_live_frame_seconds_bucket{le=\"+Inf\"} ", live_.returned, "\n");
  absl::StrAppend(&out, "fusiond_live_frame_seconds_sum ", absl::StrFormat("%.6f", live_.sum_seconds), "\n");
  absl::StrAppend(&out, "fusiond_live_frame_seconds_count ", live_.returned, "\n");
  Family(out, "fusiond_jobs_total", "counter", "Jobs ended since start, by final state.");
  for (const v1::JobState final_state : {v1::SUCCEEDED, v1::FAILED, v1::CANCELLED}) {
    const std::string& state = v1::JobState_Name(final_state);
    const auto it = jobs_.find(state);
    absl::StrAppend(&out, "fusiond_jobs_total{state=\"", state, "\"} ", it == jobs_.end() ? 0 : it->second, "\n");
  }
  Family(out, "fusiond_stage_seconds", "histogram", "Pipeline stage durations, seconds, by stage and mode.");
  for (const auto& [key, h] : stages_) {
    const std::string labels = absl::StrCat("stage=\"", Label(key.first), "\",mode=\"", key.second, "\"");
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kStageBuckets.size(); ++i) {
      cumulative += h.buckets[i];
      absl::StrAppend(&out, "fusiond_stage_seconds_bucket{", labels, ",le=\"", absl::StrFormat("%g", kStageBuckets[i]),
                      "\"} ", cumulative, "\n");
    }
    absl::StrAppend(&out, "fusiond_stage_seconds_bucket{", labels, ",le=\"+Inf\"} ", h.count, "\n");
    absl::StrAppend(&out, "fusiond_stage_seconds_sum{", labels, "} ", absl::StrFormat("%.6f", h.sum), "\n");
    absl::StrAppend(&out, "fusiond_stage_seconds_count{", labels, "} ", h.count, "\n");
  }
  return out;
}

}  // namespace fusion
