#include "observe/memory_timeline.h"

#include "absl/strings/str_cat.h"

namespace fusion {
namespace {
// A JSON string literal's contents for `s` (model names and tiers come from the catalogue).
std::string Escaped(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(&out, "\\u00", absl::Hex(static_cast<unsigned char>(c), absl::kZeroPad2));
    } else {
      out += c;
    }
  }
  return out;
}
}  // namespace

MemoryTimeline::~MemoryTimeline() { Stop(); }

void MemoryTimeline::Record(const v1::MemoryState& state) {
  Sample s{.unix_ms = state.unix_ms(),
           .device_budget = state.device().budget_bytes(),
           .device_used = state.device().used_bytes(),
           .device_reserved = state.device().reserved_bytes(),
           .host_used = state.host().used_bytes(),
           .evictions = state.counters().evictions()};
  for (const auto& [step, n] : state.counters().oom_recovered()) {
    if (step != "failed") s.oom_recovered += n;
  }
  for (const v1::ModelInfo& m : state.models()) {
    if (m.tier() == "storage") continue;
    s.models.push_back({m.name(), m.tier(), m.tier() == "device" ? m.bytes() : 0, m.host_bytes()});
  }
  MutexLock lock(&mu_);
  if (ring_.size() < capacity_) {
    ring_.push_back(std::move(s));
  } else {
    ring_[next_] = std::move(s);
    next_ = (next_ + 1) % capacity_;
  }
}

size_t MemoryTimeline::size() const {
  MutexLock lock(&mu_);
  return ring_.size();
}

std::string MemoryTimeline::JsonLines(int64_t since_unix_ms) const {
  MutexLock lock(&mu_);
  std::string out;
  for (size_t i = 0; i < ring_.size(); ++i) {
    const Sample& s = ring_[(next_ + i) % ring_.size()];
    if (s.unix_ms <= since_unix_ms) continue;
    absl::StrAppend(&out, "{\"unix_ms\":", s.unix_ms, ",\"device_budget\":", s.device_budget,
                    ",\"device_used\":", s.device_used, ",\"device_reserved\":", s.device_reserved,
                    ",\"host_used\":", s.host_used, ",\"evictions\":", s.evictions,
                    ",\"oom_recovered\":", s.oom_recovered, ",\"models\":{");
    for (size_t k = 0; k < s.models.size(); ++k) {
      const ModelSample& m = s.models[k];
      absl::StrAppend(&out, k ? "," : "", "\"", Escaped(m.name), "\":{\"tier\":\"", Escaped(m.tier), "\",\"bytes\":", m.device_bytes,
                      ",\"host_bytes\":", m.host_bytes, "}");
    }
    out += "}}\n";
  }
  return out;
}

void MemoryTimeline::Start(absl::Duration period, Snapshot snapshot) {
  Stop();
  {
    MutexLock lock(&mu_);
    stop_ = false;
  }
  thread_ = std::thread([this, period, snapshot = std::move(snapshot)] {
    for (;;) {
      if (auto state = snapshot(); state.ok()) Record(*state);
      MutexLock lock(&mu_);
      const absl::Time until = absl::Now() + period;
      while (!stop_ && absl::Now() < until) stop_cv_.WaitWithDeadline(&mu_, until);
      if (stop_) return;
    }
  });
}

void MemoryTimeline::Stop() {
  {
    MutexLock lock(&mu_);
    stop_ = true;
  }
  stop_cv_.SignalAll();
  if (thread_.joinable()) thread_.join();
}

}  // namespace fusion
