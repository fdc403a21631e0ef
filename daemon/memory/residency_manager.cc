#include "memory/residency_manager.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/size.h"
#include "base/status_macros.h"

namespace fusion {

struct ResidencyManager::Model {
  ModelSpec spec;
  ModelState state = ModelState::kAbsent;
  uint64_t device_bytes = 0;  // the charge: estimate, then measured
  uint64_t host_bytes = 0;
  // The weights are in the host tier (charged to host_used_). Independent of `state` while the
  // model is resident: a device copy may have had its host copy dropped under the host budget.
  // Always set in HOST and UPLOADING, never in ABSENT and LOADING.
  bool host_copy = false;
  // Bytes reserved for this model outside leases: model + working set while LOADING/UPLOADING,
  // then the working set of an admission until its lease is recorded.
  uint64_t transit = 0;
  uint32_t admitting = 0;  // admissions between MakeResident and their caller's bookkeeping
  bool measured = false;
  bool pinned = false;
  uint32_t leases = 0;
  uint64_t last_use = 0;
  int64_t last_use_ms = 0;
  uint64_t last_working = 0;  // ModelSnapshot::last_working_bytes
  absl::Time idle_since;  // the keep-alive's countdown start (the clock's time)
  ResidencyCounters counters;

  bool Resident() const {
    return state == ModelState::kDevice || state == ModelState::kInUse ||
           state == ModelState::kEvicting;
  }
  bool InTransit() const {
    return state == ModelState::kLoading || state == ModelState::kUploading ||
           state == ModelState::kEvicting;
  }
  bool Evictable() const {
    return state == ModelState::kDevice && leases == 0 && !pinned && admitting == 0;
  }
  // The host copy may be released now: no loader call for this model is in flight.
  bool HostDroppable() const {
    return host_copy && (state == ModelState::kHost || state == ModelState::kDevice ||
                         state == ModelState::kInUse);
  }
};

namespace {
std::string B(uint64_t bytes) { return FormatBytes(bytes); }
}  // namespace

Lease& Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Release();
    manager_ = std::exchange(other.manager_, nullptr);
    id_ = other.id_;
    model_ = std::move(other.model_);
    working_bytes_ = other.working_bytes_;
    tier_ = other.tier_;
  }
  return *this;
}

void Lease::Release() {
  if (manager_ != nullptr) std::exchange(manager_, nullptr)->ReleaseLease(id_);
}

absl::StatusOr<std::unique_ptr<ResidencyManager>> ResidencyManager::Create(Options options) {
  ASSIGN_OR_RETURN(auto policy, MakeEvictionPolicy(options.policy));
  return std::unique_ptr<ResidencyManager>(
      new ResidencyManager(std::move(options), std::move(policy)));
}

ResidencyManager::ResidencyManager(Options options, std::unique_ptr<EvictionPolicy> policy)
    : options_(std::move(options)),
      policy_(std::move(policy)),
      device_budget_(options_.device_budget_bytes),
      host_budget_(options_.host_budget_bytes),
      keep_alive_(options_.keep_alive) {
  if (options_.keep_alive_thread) keep_alive_thread_ = std::thread([this] { KeepAliveLoop(); });
}

ResidencyManager::~ResidencyManager() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  changed_.SignalAll();
  if (keep_alive_thread_.joinable()) keep_alive_thread_.join();
}

absl::Status ResidencyManager::RegisterModel(const ModelSpec& spec) {
  if (spec.device_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat("model '", spec.name, "' has 0 bytes"));
  }
  if (options_.loader == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot register model '", spec.name, "': no model loader"));
  }
  MutexLock lock(&mu_);
  auto model = std::make_unique<Model>();
  model->spec = spec;
  model->device_bytes = spec.device_bytes;
  model->host_bytes = spec.host_bytes != 0 ? spec.host_bytes : spec.device_bytes;
  if (!models_.emplace(spec.name, std::move(model)).second) {
    return absl::AlreadyExistsError(absl::StrCat("model '", spec.name, "' is already registered"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Lease> ResidencyManager::Acquire(const Owner& owner, const std::string& name,
                                                uint64_t working_bytes, absl::Time deadline,
                                                const std::function<bool()>& cancelled) {
  MutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
  Model* m = it->second.get();
  m->last_working = working_bytes;
  RETURN_IF_ERROR(MakeResident(m, working_bytes, deadline, cancelled));
  const uint64_t id = next_lease_++;
  leases_[id] = LeaseSnapshot{owner, name, working_bytes};
  m->transit -= working_bytes;  // now reserved by the lease
  --m->admitting;
  ++m->leases;
  m->state = ModelState::kInUse;
  Touch(m);
  Changed();
  return Lease(this, id, name, working_bytes);
}

uint64_t ResidencyManager::HostDroppableBytes() const {
  uint64_t bytes = 0;
  for (const auto& [name, m] : models_) {
    if (m->HostDroppable()) bytes += m->host_bytes;
  }
  return bytes;
}

// Loops until `m` is on the device with `working` reserved, or refuses. See the header for the
// three outcomes; the lock is released while evicting, transferring and waiting.
absl::Status ResidencyManager::MakeResident(Model* m, uint64_t working, absl::Time deadline,
                                            const std::function<bool()>& cancelled) {
  bool counted_wait = false;
  while (true) {
    const bool resident = m->state == ModelState::kDevice || m->state == ModelState::kInUse;
    // The model itself cannot be evicted while it is wanted, so "can never fit" counts it
    // whether or not it is resident; free space is needed only for what is not there yet.
    const uint64_t total = working + m->device_bytes;
    const uint64_t pinned_other = pinned_ - (m->pinned ? m->device_bytes : 0);
    if (total + pinned_other > device_budget_) {
      return Refuse(m, absl::ResourceExhaustedError(absl::StrCat(
          "model '", m->spec.name, "' needs ", B(total), " (model ", B(m->device_bytes),
          " + working set ", B(working), "), ", B(pinned_other), " pinned, budget ",
          B(device_budget_), ": it cannot fit even after every eviction")));
    }
    // An upload also needs room for its temporaries, as far as the budget has any.
    const uint64_t extra =
        resident ? 0 : std::min(m->spec.upload_extra_bytes, device_budget_ - total - pinned_other);
    const uint64_t need = working + (resident ? 0 : m->device_bytes + extra);
    if (!m->InTransit() && !over_budget_) {
      const uint64_t load = used_ + reserved_;
      const uint64_t free = load >= device_budget_ ? 0 : device_budget_ - load;
      if (need <= free) {
        if (!resident) return Bring(m, working, extra);
        reserved_ += working;
        m->transit += working;
        ++m->admitting;
        ++m->counters.hits;
        ++totals_.hits;
        return absl::OkStatus();
      }
      if (need <= free + EvictableBytes(m)) {
        Evict(need - free, m);
        continue;
      }
    }
    if (!counted_wait) {
      counted_wait = true;
      ++m->counters.waits;
      ++totals_.waits;
    }
    ++waiters_;
    // A cancellable wait wakes every kCancelPoll to look (a cancel does not signal changed_).
    const absl::Time wake = cancelled ? std::min(deadline, absl::Now() + kCancelPoll) : deadline;
    const bool timed_out = changed_.WaitWithDeadline(&mu_, wake) && wake == deadline;
    --waiters_;
    if (cancelled && cancelled()) {
      return absl::CancelledError(
          absl::StrCat("job cancelled while waiting for device memory for model '", m->spec.name, "'"));
    }
    if (timed_out) {
      uint64_t leased = reserved_;
      for (const Model* r : resident_) leased += r->leases > 0 ? r->device_bytes : 0;
      return Refuse(m, absl::DeadlineExceededError(absl::StrCat(
          "model '", m->spec.name, "' needs ", B(need), ", ", B(EvictableBytes(m)),
          " evictable, ", B(leased), " held by running stages, budget ", B(device_budget_),
          ": waited for memory until the deadline")));
    }
  }
}

// Loads (if ABSENT) and uploads `m` with the lock released; its bytes, the upload's `extra`
// temporaries and `working` stay reserved meanwhile so no one else can take them.
absl::Status ResidencyManager::Bring(Model* m, uint64_t working, uint64_t extra) {
  m->transit = m->device_bytes + extra + working;
  reserved_ += m->transit;
  if (m->state == ModelState::kAbsent) {
    m->state = ModelState::kLoading;
    Changed();
    mu_.Unlock();
    absl::StatusOr<uint64_t> host = options_.loader->LoadToHost(m->spec.name);
    mu_.Lock();
    if (!host.ok()) {
      reserved_ -= std::exchange(m->transit, 0);
      m->state = ModelState::kAbsent;
      Changed();
      changed_.SignalAll();
      return host.status();
    }
    m->host_bytes = *host;
    m->host_copy = true;
    host_used_ += *host;
    ++m->counters.loads;
    ++totals_.loads;
  }
  m->state = ModelState::kUploading;
  EnforceHostBudget();
  Changed();
  mu_.Unlock();
  absl::StatusOr<uint64_t> device = options_.loader->Upload(m->spec.name);
  mu_.Lock();
  reserved_ -= std::exchange(m->transit, 0);
  if (!device.ok()) {
    m->state = ModelState::kHost;
    Changed();
    changed_.SignalAll();
    return device.status();
  }
  m->device_bytes = *device;
  m->measured = true;
  used_ += *device;
  reserved_ += working;
  m->transit = working;
  ++m->admitting;
  resident_.insert(m);
  m->state = ModelState::kDevice;
  Touch(m);  // the most recent host copy: others' go first if the host tier is over budget
  EnforceHostBudget();
  ++m->counters.uploads;
  ++m->counters.misses;
  m->counters.bytes_uploaded += *device;
  ++totals_.uploads;
  ++totals_.misses;
  totals_.bytes_uploaded += *device;
  // A measurement above the estimate may overflow the budget: evict others down to it.
  if (used_ + reserved_ > device_budget_) {
    over_budget_ = true;
    EnforceDeviceBudget(m);
  }
  Changed();
  changed_.SignalAll();
  return absl::OkStatus();
}

absl::Status ResidencyManager::Refuse(Model* m, absl::Status status) {
  ++m->counters.refusals;
  ++totals_.refusals;
  return status;
}

uint64_t ResidencyManager::EvictableBytes(const Model* except) const {
  uint64_t bytes = 0;
  for (const Model* r : resident_) {
    if (r != except && r->Evictable()) bytes += r->device_bytes;
  }
  return bytes;
}

void ResidencyManager::Evict(uint64_t bytes, const Model* except) {
  std::vector<EvictionCandidate> candidates;
  std::vector<Model*> models;
  for (Model* r : resident_) {
    if (r == except || !r->Evictable()) continue;
    candidates.push_back({&r->spec.name, r->device_bytes, r->last_use});
    models.push_back(r);
  }
  std::vector<Model*> victims;
  const uint64_t room = device_budget_ > pinned_ ? device_budget_ - pinned_ : 0;
  const std::string* admitting = except != nullptr ? &except->spec.name : nullptr;
  for (size_t i : policy_->ChooseVictimsWithRoom(candidates, bytes, options_.future, room, admitting)) {
    victims.push_back(models[i]);
  }
  EvictNow(std::move(victims));
}

void ResidencyManager::PrepareEviction() {
  if (options_.future == nullptr) return;
  uint64_t room;
  std::vector<std::string> resident;
  {
    MutexLock lock(&mu_);
    room = device_budget_ > pinned_ ? device_budget_ - pinned_ : 0;
    for (const Model* r : resident_) {
      if (!r->pinned) resident.push_back(r->spec.name);
    }
  }
  policy_->Prepare(*options_.future, room, resident);
}

void ResidencyManager::EvictNow(std::vector<Model*> victims) {
  if (victims.empty()) return;
  for (Model* v : victims) {
    v->state = ModelState::kEvicting;
    ++v->counters.evictions;
    ++totals_.evictions;
  }
  Changed();
  mu_.Unlock();
  for (Model* v : victims) options_.loader->ReleaseDevice(v->spec.name);
  mu_.Lock();
  for (Model* v : victims) {
    used_ -= v->device_bytes;
    resident_.erase(v);
    // Without a host copy (dropped under the host budget) the weights are only in storage.
    v->state = v->host_copy ? ModelState::kHost : ModelState::kAbsent;
  }
  if (over_budget_ && used_ + reserved_ <= device_budget_) over_budget_ = false;
  EnforceHostBudget();
  Changed();
  changed_.SignalAll();
}

void ResidencyManager::EnforceDeviceBudget(const Model* except) {
  while (used_ + reserved_ > device_budget_ && EvictableBytes(except) > 0) {
    Evict(used_ + reserved_ - device_budget_, except);
  }
  over_budget_ = used_ + reserved_ > device_budget_;
}

// Drops host copies down to the host budget: first every copy that alone exceeds the whole
// budget (it can never stay), then least recently used first, whether or not the model is also
// on the device (its device copy stays; an upload after its eviction re-reads storage). A copy
// with a loader call in flight (UPLOADING, EVICTING) cannot be dropped now: one larger than the
// budget is dropped when its call ends (this runs again then), so others are not dropped for
// it; the others count as staying. The release is cheap (freeing RAM): it happens under the lock.
void ResidencyManager::EnforceHostBudget() {
  if (host_budget_ == 0) return;
  uint64_t oversize_pending = 0;  // oversize copies in transit: dropped once their call ends
  for (const auto& [name, m] : models_) {
    if (m->host_copy && m->host_bytes > host_budget_ && !m->HostDroppable()) {
      oversize_pending += m->host_bytes;
    }
  }
  // Victims in order of (fits the budget alone, last use): oversize first, then LRU.
  auto rank = [&](const Model* m) {
    return std::pair(m->host_bytes <= host_budget_, m->last_use);
  };
  while (host_used_ - oversize_pending + host_reserved_ > host_budget_) {
    Model* victim = nullptr;
    for (auto& [name, m] : models_) {
      if (!m->HostDroppable()) continue;
      if (victim == nullptr || rank(m.get()) < rank(victim)) victim = m.get();
    }
    if (victim == nullptr) return;
    DropHostCopy(victim);
  }
}

void ResidencyManager::DropHostCopy(Model* m) {
  options_.loader->ReleaseHost(m->spec.name);
  host_used_ -= m->host_bytes;
  m->host_copy = false;
  if (m->state == ModelState::kHost) m->state = ModelState::kAbsent;
}

void ResidencyManager::ReleaseLease(uint64_t id) {
  MutexLock lock(&mu_);
  if (auto h = host_leases_.find(id); h != host_leases_.end()) {
    host_reserved_ -= h->second.working_bytes;
    host_leases_.erase(h);
    Changed();
    changed_.SignalAll();
    return;
  }
  auto it = leases_.find(id);
  if (it == leases_.end()) return;
  Model* m = models_.at(it->second.model).get();
  reserved_ -= it->second.working_bytes;
  leases_.erase(it);
  if (--m->leases == 0) m->state = ModelState::kDevice;
  Touch(m);
  const uint64_t busy = used_ + reserved_;
  const uint64_t free = device_budget_ > busy ? device_budget_ - busy : 0;
  // The minimum free scales with the budget (at most an eighth of it): fusiond's 512 MiB on a
  // 256 MiB budget was always "pressure", and detect and landmarks were uploaded for every use.
  const uint64_t min_free = std::min(options_.one_shot_min_free_bytes, device_budget_ / 8);
  const bool pressure =
      waiters_ > 0 ||
      static_cast<double>(busy) >= options_.one_shot_pressure * static_cast<double>(device_budget_) ||
      free < min_free;
  if (m->spec.one_shot && m->Evictable() && pressure) {
    EvictNow({m});
  } else if (over_budget_) {
    EnforceDeviceBudget(nullptr);
  }
  Changed();
  changed_.SignalAll();
}

absl::Status ResidencyManager::Pin(const std::string& name, absl::Time deadline) {
  MutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
  Model* m = it->second.get();
  auto too_many = [&] {
    return Refuse(m, absl::FailedPreconditionError(absl::StrCat(
        "cannot pin model '", name, "' (", B(m->device_bytes), "): ", B(pinned_),
        " already pinned, budget ", B(device_budget_))));
  };
  if (m->pinned) return absl::OkStatus();
  if (pinned_ + m->device_bytes > device_budget_) return too_many();
  RETURN_IF_ERROR(MakeResident(m, 0, deadline));
  --m->admitting;
  // The lock was released while uploading: another Pin may have pinned it or others meanwhile,
  // and the measured bytes may exceed the estimate.
  if (!m->pinned) {
    if (pinned_ + m->device_bytes > device_budget_) return too_many();
    m->pinned = true;
    pinned_ += m->device_bytes;
  }
  Touch(m);
  Changed();
  return absl::OkStatus();
}

absl::Status ResidencyManager::Unpin(const std::string& name) {
  MutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
  Model* m = it->second.get();
  if (!m->pinned) return absl::OkStatus();
  m->pinned = false;
  pinned_ -= m->device_bytes;
  m->idle_since = Now();  // the keep-alive counts from the unpin
  if (over_budget_) EnforceDeviceBudget(nullptr);
  Changed();
  changed_.SignalAll();
  return absl::OkStatus();
}

absl::Status ResidencyManager::Load(const std::string& name, absl::Time deadline) {
  MutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
  Model* m = it->second.get();
  RETURN_IF_ERROR(MakeResident(m, 0, deadline));
  --m->admitting;
  Touch(m);
  Changed();
  changed_.SignalAll();  // no lease will end: the keep-alive thread learns of the countdown here
  return absl::OkStatus();
}

absl::Status ResidencyManager::Unload(const std::string& name) {
  MutexLock lock(&mu_);
  auto it = models_.find(name);
  if (it == models_.end()) return absl::NotFoundError(absl::StrCat("unknown model '", name, "'"));
  Model* m = it->second.get();
  if (m->pinned || m->leases > 0 || m->InTransit()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot unload model '", name, "': ", m->pinned ? "pinned" : "", m->leases > 0 ? "leased" : "",
        m->InTransit() ? ToString(m->state) : ""));
  }
  if (m->Resident()) EvictNow({m});
  if (m->state == ModelState::kHost) {  // not re-acquired while the lock was released
    DropHostCopy(m);
    Changed();
  }
  return absl::OkStatus();
}

uint64_t ResidencyManager::EvictAllEvictable() {
  MutexLock lock(&mu_);
  std::vector<Model*> victims;
  uint64_t bytes = 0;
  for (Model* r : resident_) {
    if (!r->Evictable()) continue;
    victims.push_back(r);
    bytes += r->device_bytes;
  }
  EvictNow(std::move(victims));
  return bytes;
}

void ResidencyManager::SetDeviceBudget(uint64_t bytes) {
  MutexLock lock(&mu_);
  device_budget_ = bytes;
  over_budget_ = used_ + reserved_ > device_budget_;
  EnforceDeviceBudget(nullptr);
  Changed();
  changed_.SignalAll();
}

void ResidencyManager::SetHostBudget(uint64_t bytes) {
  MutexLock lock(&mu_);
  host_budget_ = bytes;
  EnforceHostBudget();
  Changed();
  changed_.SignalAll();  // a larger budget may admit a waiting host working set
}

uint64_t ResidencyManager::DeviceUsage() const {
  MutexLock lock(&mu_);
  return used_ + reserved_;
}

uint64_t ResidencyManager::WorkingSetEstimate(const std::string& model, const std::string& bucket,
                                              uint64_t fallback) const {
  MutexLock lock(&mu_);
  auto it = working_sets_.find(absl::StrCat(model, "@", bucket));
  return it == working_sets_.end() ? fallback : it->second;
}

void ResidencyManager::RecordWorkingSetPeak(const std::string& model, const std::string& bucket,
                                            uint64_t peak) {
  MutexLock lock(&mu_);
  uint64_t& estimate = working_sets_[absl::StrCat(model, "@", bucket)];
  estimate = std::max(estimate, peak);
}

void ResidencyManager::Touch(Model* m) {
  m->last_use = ++tick_;
  m->last_use_ms = absl::ToUnixMillis(absl::Now());
  m->idle_since = Now();
}

absl::Time ResidencyManager::Now() const { return options_.clock ? options_.clock() : absl::Now(); }

std::optional<absl::Duration> ResidencyManager::KeepAliveOf(const Model* m) const {
  if (m->pinned) return std::nullopt;
  const absl::Duration keep = m->spec.keep_alive.value_or(keep_alive_);
  if (keep == absl::InfiniteDuration()) return std::nullopt;
  return keep;
}

absl::Time ResidencyManager::ExpiryOf(const Model* m) const {
  const std::optional<absl::Duration> keep = KeepAliveOf(m);
  if (!keep || !m->Evictable()) return absl::InfiniteFuture();
  return m->idle_since + *keep;
}

int ResidencyManager::ExpireIdle() {
  MutexLock lock(&mu_);
  absl::Time next;
  return ExpireDue(&next);
}

absl::Time ResidencyManager::NextExpiry() const {
  MutexLock lock(&mu_);
  absl::Time next = absl::InfiniteFuture();
  for (const Model* r : resident_) next = std::min(next, ExpiryOf(r));
  return next;
}

void ResidencyManager::SetKeepAlive(absl::Duration keep_alive) {
  MutexLock lock(&mu_);
  keep_alive_ = keep_alive;
  changed_.SignalAll();  // the keep-alive thread recomputes its next wake-up
}

// A due model that a queued or running job's remaining stages still name stays; the queue does
// not signal the manager when that ends, so it is looked at again after kKeepAliveRecheck.
int ResidencyManager::ExpireDue(absl::Time* next) {
  const absl::Time now = Now();
  *next = absl::InfiniteFuture();
  std::vector<Model*> due;
  for (Model* r : resident_) {
    const absl::Time at = ExpiryOf(r);
    if (at > now) {
      *next = std::min(*next, at);
    } else if (options_.future != nullptr && options_.future->NextUse(r->spec.name) != kNoFutureUse) {
      *next = std::min(*next, now + kKeepAliveRecheck);
    } else {
      due.push_back(r);
    }
  }
  if (due.empty()) return 0;
  for (Model* v : due) {
    ++v->counters.expirations;
    ++totals_.expirations;
  }
  const int evicted = static_cast<int>(due.size());
  EvictNow(std::move(due));
  if (resident_.empty() && reserved_ == 0 && options_.on_device_empty) {
    mu_.Unlock();
    options_.on_device_empty();
    mu_.Lock();
  }
  return evicted;
}

// Sleeps until the next expiry or a change (changed_ is signalled whenever a lease ends or bytes
// move), never polls. The condition variable waits on real time: the clock's distance to the
// expiry is added to absl::Now().
void ResidencyManager::KeepAliveLoop() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    absl::Time next;
    if (ExpireDue(&next) > 0) continue;  // the lock was released meanwhile: look again
    const absl::Time wake = next == absl::InfiniteFuture() ? next : absl::Now() + (next - Now());
    changed_.WaitWithDeadline(&mu_, wake);
  }
}

void ResidencyManager::Changed() {
  peak_ = std::max(peak_, used_ + reserved_);
  host_peak_ = std::max(host_peak_, host_used_ + host_reserved_);
  if (!options_.check_invariant) return;
  if (absl::Status s = CheckInvariantLocked(); !s.ok()) {
    std::fprintf(stderr, "residency invariant broken: %s\n", s.ToString().c_str());
    std::abort();
  }
}

absl::Status ResidencyManager::CheckInvariant() const {
  MutexLock lock(&mu_);
  return CheckInvariantLocked();
}

absl::Status ResidencyManager::CheckInvariantLocked() const {
  uint64_t used = 0, reserved = 0, pinned = 0, host = 0;
  absl::flat_hash_map<std::string, uint32_t> leases;
  for (const auto& [id, lease] : leases_) {
    reserved += lease.working_bytes;
    ++leases[lease.model];
  }
  for (const auto& [name, m] : models_) {
    if (m->Resident()) used += m->device_bytes;
    if (m->Resident() != resident_.contains(m.get())) {
      return absl::InternalError(absl::StrCat("model '", name, "' residency set mismatch"));
    }
    reserved += m->transit;
    if (m->pinned) pinned += m->device_bytes;
    if (m->host_copy) host += m->host_bytes;
    const bool needs_host = m->state == ModelState::kHost || m->state == ModelState::kUploading;
    const bool storage_only = m->state == ModelState::kAbsent || m->state == ModelState::kLoading;
    if ((needs_host && !m->host_copy) || (storage_only && m->host_copy)) {
      return absl::InternalError(absl::StrCat("model '", name, "' is ", ToString(m->state),
                                              m->host_copy ? " with" : " without", " a host copy"));
    }
    if ((m->pinned || m->leases > 0) && (m->state == ModelState::kEvicting || !m->Resident())) {
      return absl::InternalError(absl::StrCat("pinned/leased model '", name, "' is ",
                                              ToString(m->state)));
    }
    if (leases[name] != m->leases || (m->leases > 0) != (m->state == ModelState::kInUse)) {
      return absl::InternalError(absl::StrCat("model '", name, "' lease count mismatch"));
    }
  }
  if (used != used_ || reserved != reserved_ || pinned != pinned_ || host != host_used_) {
    return absl::InternalError(absl::StrCat("accounting mismatch: used ", used, "/", used_,
                                            " reserved ", reserved, "/", reserved_, " pinned ",
                                            pinned, "/", pinned_, " host ", host, "/", host_used_));
  }
  if (!over_budget_ && used_ + reserved_ > device_budget_) {
    return absl::InternalError(absl::StrCat("resident ", B(used_), " + reserved ", B(reserved_),
                                            " exceed the device budget ", B(device_budget_)));
  }
  return absl::OkStatus();
}

void ResidencyManager::RecordOomRecovery(const std::string& step) {
  MutexLock lock(&mu_);
  ++oom_recovered_[step];
}

ResidencySnapshot ResidencyManager::Snapshot() const {
  MutexLock lock(&mu_);
  ResidencySnapshot s;
  s.device = {device_budget_, used_, reserved_, peak_, over_budget_};
  s.host = {host_budget_, host_used_, host_reserved_, host_peak_,
            host_budget_ != 0 && host_used_ + host_reserved_ > host_budget_};
  const absl::Time now = Now();
  for (const auto& [name, m] : models_) {
    s.models.push_back({name, m->state, m->device_bytes, m->host_copy ? m->host_bytes : 0,
                        m->measured, m->pinned, m->spec.one_shot, m->leases, m->last_use_ms,
                        m->counters, KeepAliveOf(m.get())});
    if (const absl::Time at = ExpiryOf(m.get()); at != absl::InfiniteFuture()) {
      s.models.back().expires_in = std::max(at - now, absl::ZeroDuration());
    }
    s.models.back().last_working_bytes = m->last_working;
  }
  std::sort(s.models.begin(), s.models.end(),
            [](const ModelSnapshot& a, const ModelSnapshot& b) { return a.name < b.name; });
  for (const auto& [id, lease] : leases_) s.leases.push_back(lease);
  for (const auto& [id, lease] : host_leases_) s.host_leases.push_back(lease);
  s.totals = totals_;
  s.oom_recovered = oom_recovered_;
  return s;
}

}  // namespace fusion
