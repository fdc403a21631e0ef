#include "jobs/fair_queue.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace fusion::jobs {

size_t FairQueue::BestIndex(const std::vector<Entry>& jobs) {
  size_t best = 0;
  for (size_t i = 1; i < jobs.size(); ++i) {
    const Entry& a = jobs[i];
    const Entry& b = jobs[best];
    if (a.priority > b.priority || (a.priority == b.priority && a.sequence < b.sequence)) best = i;
  }
  return best;
}

absl::Status FairQueue::Push(Entry entry, bool enforce_limit) {
  MutexLock lock(&mu_);
  std::vector<Entry>& jobs = by_uid_[entry.uid];
  if (enforce_limit && jobs.size() >= options_.max_queued_per_uid) {
    return absl::ResourceExhaustedError(absl::StrCat("uid ", entry.uid, " already has ",
                                                     jobs.size(), " queued jobs (limit ",
                                                     options_.max_queued_per_uid, ")"));
  }
  if (jobs.empty()) rotation_.push_back(entry.uid);
  jobs.push_back(std::move(entry));
  ++size_;
  return absl::OkStatus();
}

bool FairQueue::Remove(const std::string& id) {
  MutexLock lock(&mu_);
  for (auto& [uid, jobs] : by_uid_) {
    auto it = std::find_if(jobs.begin(), jobs.end(), [&](const Entry& e) { return e.id == id; });
    if (it == jobs.end()) continue;
    jobs.erase(it);
    --size_;
    if (jobs.empty()) {
      const uid_t gone = uid;
      if (!rotation_.empty() && rotation_.front() == gone) bypassed_ = 0;
      rotation_.erase(std::find(rotation_.begin(), rotation_.end(), gone));
      by_uid_.erase(gone);
    }
    return true;
  }
  return false;
}

FairQueue::Entry FairQueue::TakeFrom(uid_t uid) {
  std::vector<Entry>& jobs = by_uid_[uid];
  const size_t i = BestIndex(jobs);
  Entry e = std::move(jobs[i]);
  jobs.erase(jobs.begin() + static_cast<std::ptrdiff_t>(i));
  --size_;
  rotation_.erase(std::find(rotation_.begin(), rotation_.end(), uid));
  if (jobs.empty()) {
    by_uid_.erase(uid);
  } else {
    rotation_.push_back(uid);  // served: to the back of the rotation
  }
  return e;
}

std::optional<FairQueue::Entry> FairQueue::Pop(const IsResident& is_resident, std::optional<Priority> above) {
  MutexLock lock(&mu_);
  if (above) {
    // A lent slot: the first uid in the rotation whose best job outranks `above` (a uid's best
    // job is its highest priority). The rotation and bypass count move as for any pop.
    for (uid_t uid : rotation_) {
      const std::vector<Entry>& jobs = by_uid_.at(uid);
      if (jobs[BestIndex(jobs)].priority <= *above) continue;
      if (uid == rotation_.front()) bypassed_ = 0;
      return TakeFrom(uid);
    }
    return std::nullopt;
  }
  if (rotation_.empty()) return std::nullopt;
  const uid_t due = rotation_.front();
  auto first_resident = [&](uid_t uid) {
    const std::vector<Entry>& jobs = by_uid_.at(uid);
    const Entry& e = jobs[BestIndex(jobs)];
    return !e.stage_models.empty() && is_resident(e.stage_models.front());
  };
  if (is_resident && bypassed_ < options_.max_bypass && !first_resident(due)) {
    for (size_t k = 1; k < rotation_.size(); ++k) {
      const uid_t other = rotation_[k];
      if (first_resident(other)) {
        ++bypassed_;
        return TakeFrom(other);
      }
    }
  }
  bypassed_ = 0;
  return TakeFrom(due);
}

std::optional<Priority> FairQueue::TopPriority() const {
  ReaderMutexLock lock(&mu_);
  std::optional<Priority> top;
  for (const auto& [uid, jobs] : by_uid_) {
    const Priority p = jobs[BestIndex(jobs)].priority;
    if (!top || p > *top) top = p;
  }
  return top;
}

std::vector<const FairQueue::Entry*> FairQueue::FairOrder() const {
  // Simulate round-robin pops: each round takes each uid's next-best job.
  absl::flat_hash_map<uid_t, std::vector<const Entry*>> sorted;
  for (const auto& [uid, jobs] : by_uid_) {
    std::vector<const Entry*>& v = sorted[uid];
    for (const Entry& e : jobs) v.push_back(&e);
    std::sort(v.begin(), v.end(), [](const Entry* a, const Entry* b) {
      return a->priority != b->priority ? a->priority > b->priority : a->sequence < b->sequence;
    });
  }
  std::vector<const Entry*> order;
  order.reserve(size_);
  for (size_t round = 0; order.size() < size_; ++round) {
    for (uid_t uid : rotation_) {
      const auto& v = sorted[uid];
      if (round < v.size()) order.push_back(v[round]);
    }
  }
  return order;
}

std::optional<size_t> FairQueue::Position(const std::string& id) const {
  ReaderMutexLock lock(&mu_);
  const std::vector<const Entry*> order = FairOrder();
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i]->id == id) return i;
  }
  return std::nullopt;
}

std::vector<std::vector<std::string>> FairQueue::UpcomingStages(size_t max_jobs) const {
  ReaderMutexLock lock(&mu_);
  std::vector<std::vector<std::string>> out;
  for (const Entry* e : FairOrder()) {
    if (out.size() >= max_jobs) break;
    out.push_back(e->stage_models);
  }
  return out;
}

std::map<uid_t, size_t> FairQueue::QueuedPerUid() const {
  ReaderMutexLock lock(&mu_);
  std::map<uid_t, size_t> out;
  for (const auto& [uid, jobs] : by_uid_) out[uid] = jobs.size();
  return out;
}

size_t FairQueue::size() const {
  ReaderMutexLock lock(&mu_);
  return size_;
}

}  // namespace fusion::jobs
