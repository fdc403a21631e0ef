#include "rpc/live_sessions.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace fusion {

double NearestRankPercentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(values.size())));
  return values[std::clamp<size_t>(rank, 1, values.size()) - 1];
}

LiveSessionRegistry::Entry::~Entry() { registry_->Remove(key_); }

void LiveSessionRegistry::Entry::Leased(const std::string& device, const std::vector<std::string>& models,
                                        uint64_t model_bytes) {
  registry_->Update(key_, [&](Session& s) {
    s.info.set_device(device);
    s.info.clear_models();
    for (const std::string& m : models) s.info.add_models(m);
    s.info.set_model_bytes(model_bytes);
  });
}

void LiveSessionRegistry::Entry::Received() {
  registry_->Update(key_, [](Session& s) { s.info.set_frames_received(s.info.frames_received() + 1); });
  registry_->Notify(FrameEvent::kReceived, 0);
}

void LiveSessionRegistry::Entry::Dropped() {
  registry_->Update(key_, [](Session& s) { s.info.set_frames_dropped(s.info.frames_dropped() + 1); });
  registry_->Notify(FrameEvent::kDropped, 0);
}

void LiveSessionRegistry::Entry::Returned(double total_ms) {
  registry_->Update(key_, [&](Session& s) {
    s.info.set_frames_returned(s.info.frames_returned() + 1);
    if (s.latency.size() < kLatencyWindow) {
      s.latency.push_back(total_ms);
    } else {
      s.latency[s.next] = total_ms;
      s.next = (s.next + 1) % kLatencyWindow;
    }
  });
  registry_->Notify(FrameEvent::kReturned, total_ms);
}

template <typename F>
void LiveSessionRegistry::Update(uint64_t key, F f) {
  MutexLock lock(&mu_);
  auto it = open_.find(key);
  if (it != open_.end()) f(it->second);
}

std::unique_ptr<LiveSessionRegistry::Entry> LiveSessionRegistry::Open(const Owner& owner, absl::Time started) {
  MutexLock lock(&mu_);
  const uint64_t key = next_key_++;
  Session& s = open_[key];
  s.info.set_session_id(owner.job_id);
  s.info.set_owner_uid(owner.uid);
  s.info.set_started_unix_ms(absl::ToUnixMillis(started));
  return std::unique_ptr<Entry>(new Entry(this, key));
}

void LiveSessionRegistry::Remove(uint64_t key) {
  MutexLock lock(&mu_);
  open_.erase(key);
}

std::vector<v1::LiveSessionInfo> LiveSessionRegistry::List(std::optional<uint32_t> uid) const {
  std::vector<std::pair<v1::LiveSessionInfo, std::vector<double>>> picked;
  {
    MutexLock lock(&mu_);
    for (const auto& [key, s] : open_) {
      if (!uid.has_value() || s.info.owner_uid() == *uid) picked.emplace_back(s.info, s.latency);
    }
  }
  std::vector<v1::LiveSessionInfo> out;
  out.reserve(picked.size());
  for (auto& [info, latency] : picked) {  // the sorting outside the lock
    v1::LiveLatency* l = info.mutable_latency();
    l->set_frames(static_cast<uint32_t>(latency.size()));
    l->set_p50_ms(NearestRankPercentile(latency, 0.50));
    l->set_p95_ms(NearestRankPercentile(latency, 0.95));
    l->set_p99_ms(NearestRankPercentile(latency, 0.99));
    out.push_back(std::move(info));
  }
  return out;
}

}  // namespace fusion
