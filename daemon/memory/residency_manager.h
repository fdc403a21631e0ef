// ResidencyManager: which stage models live on the device, and admission of stages by memory.
//
// Tiers STORAGE -> HOST -> DEVICE, each with its own budget
// (docs/ARCHITECTURE.md#invariants, 1-3). A stage calls
// Acquire(owner, model, working_bytes, deadline) and gets a move-only Lease: while it lives,
// the model is on the device and `working_bytes` are reserved for the stage's activations.
// To make room the manager evicts unleased, unpinned models chosen by its EvictionPolicy;
// evicted models drop to HOST, and HOST drops to STORAGE under the host budget.
//
// Host tier: a cache of weights in RAM. Over the host budget the manager drops host copies
// (loader ReleaseHost) until it fits: first any copy larger than the whole budget, then least
// recently used first, including the host copies of models resident on the device (the device
// copy stays; evicting it later goes straight to ABSENT). Uploading needs the host copy, so an
// Acquire/Load/Pin of a model without one loads it from storage first, uploads, and drops it
// again at once if the tier is over budget. A host budget too small for the working models
// therefore degrades to re-reading storage on each upload, never to a refusal; a model larger
// than the whole host budget is still usable (the tier is over budget only during its upload).
// At rest host used <= host budget.
//
// Invariant (checked after every change when Options::check_invariant, on by default in debug
// builds): host used = the bytes of the host copies; resident device bytes + reserved working
// sets <= device budget, unless the budget
// shrank below what cannot be evicted yet (then over_budget is reported and nothing new is
// admitted until it fits again). Pinned or leased models are never evicted. A model's charge is
// its measured bytes once uploaded; the reservation is released when the last lease drops.
//
// Host working sets (docs/ARCHITECTURE.md#invariants, 1: the host tier is budgeted like the
// device tier):
// AcquireHost reserves bytes of the host budget for a host computation (a CPU-fallback stage,
// an image buffer) before it allocates, and returns a Lease for them. Host copies of weights are
// a cache and are dropped (LRU, as above) to make room; other host leases are waited for.
// At every instant host used + host reserved <= host budget, unless the budget shrank (then
// the host tier reports over_budget and admits nothing new until it fits again).
//
// Keep-alive (docs/MEMORY.md#keep-alive): a resident model left unused for its keep-alive (no
// lease, no admission in progress, not pinned, and no remaining stage of a queued or running job
// names it in Options::future) is evicted to HOST exactly as eviction does (its host copy stays,
// a cache under the host budget). The countdown starts when the last lease ends (or a Load or
// Unpin ends); InfiniteDuration = never, ZeroDuration = as soon as it is unused. ExpireIdle()
// applies it at the injectable clock's now; with Options::keep_alive_thread a thread of the
// manager sleeps on the manager's condition variable until the next expiry or a change (no
// polling; while a due model is still named by queued work it looks again every
// kKeepAliveRecheck). When its evictions leave the device tier empty it calls
// Options::on_device_empty once (fusiond: the device allocator's cache back to the driver).
//
// Errors: NOT_FOUND unknown model; RESOURCE_EXHAUSTED at once when the request cannot fit even
// with every unpinned model gone; DEADLINE_EXCEEDED when it could fit once leases end but they
// did not end in time; FAILED_PRECONDITION for a pin beyond the budget or Unload of a pinned or
// leased model; loader errors pass through. Messages carry the numbers in binary units.
// Thread-safety: every method may be called from any thread. No lock is held across a
// ModelLoader call; waits for memory are bounded by the caller's deadline.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/mutex.h"
#include "memory/eviction_policy.h"
#include "memory/model_loader.h"
#include "memory/residency_types.h"

namespace fusion {

class ResidencyManager;

// A model in the catalogue, as the manager needs it.
struct ModelSpec {
  std::string name;
  uint64_t device_bytes = 0;  // estimate until the first upload measures it
  uint64_t host_bytes = 0;    // estimate until loaded; 0 = same as device_bytes
  bool one_shot = false;      // detect/landmarks: released right after use under pressure
  // Transient device bytes an upload needs beyond the model's own (its temporaries: about the
  // model's bytes again when the CPU device clones the weights). Reserved while the upload
  // runs, so the allocator's real usage stays within the budget; capped at what the budget has
  // beyond the model and its working set.
  uint64_t upload_extra_bytes = 0;
  // Overrides Options::keep_alive for this model (the catalogue's keep_alive); nullopt = that.
  std::optional<absl::Duration> keep_alive;
};

// Move-only handle on a model admitted to the device with a reserved working set. Destroying
// or Release()-ing it returns the working set; the model becomes evictable after its last lease.
class Lease {
 public:
  Lease() = default;
  Lease(Lease&& other) noexcept { *this = std::move(other); }
  Lease& operator=(Lease&& other) noexcept;
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;
  ~Lease() { Release(); }

  bool valid() const { return manager_ != nullptr; }
  Tier tier() const { return tier_; }  // kDevice (Acquire) or kHost (AcquireHost)
  const std::string& model() const { return model_; }
  uint64_t working_bytes() const { return working_bytes_; }
  // Returns the reservation now (one-shot). Safe to call twice.
  void Release();

 private:
  friend class ResidencyManager;
  Lease(ResidencyManager* m, uint64_t id, std::string model, uint64_t working, Tier tier = Tier::kDevice)
      : manager_(m), id_(id), model_(std::move(model)), working_bytes_(working), tier_(tier) {}
  ResidencyManager* manager_ = nullptr;
  uint64_t id_ = 0;
  std::string model_;
  uint64_t working_bytes_ = 0;
  Tier tier_ = Tier::kDevice;
};

class ResidencyManager {
 public:
  struct Options {
    uint64_t device_budget_bytes = 0;  // initial device budget; SetDeviceBudget changes it
    uint64_t host_budget_bytes = 0;    // 0 = unbounded host tier
    std::string policy = kDefaultEvictionPolicy;  // see eviction_policy.h
    // Must outlive the manager. Null only while no catalogue is attached: RegisterModel is
    // then FAILED_PRECONDITION.
    ModelLoader* loader = nullptr;
    const FutureReferences* future = nullptr;  // optional; must outlive the manager
    // A one-shot model (detect, landmarks) is evicted when its last lease ends if the device
    // is under pressure: a caller waits for memory, or resident + reserved reach this fraction
    // of the budget, or less than min(one_shot_min_free_bytes, an eighth of the budget) is
    // left (0 = no such test). fusiond sets 0.85 and 512 MiB (DaemonConfig): 32 MiB free at a
    // 256 MiB budget, 512 MiB from a 4 GiB budget up.
    double one_shot_pressure = 0.9;
    uint64_t one_shot_min_free_bytes = 0;
    // How long a model may stay on the device unused (see the header comment), until
    // SetKeepAlive; fusiond's default is 5 minutes (DaemonConfig::keep_alive_ms).
    absl::Duration keep_alive = absl::InfiniteDuration();
    // Runs the keep-alive thread (fusiond). Without it only ExpireIdle() calls expire (tests).
    bool keep_alive_thread = false;
    // The keep-alive's clock; empty = absl::Now. Tests inject one and call ExpireIdle().
    std::function<absl::Time()> clock;
    // Called without the manager's lock, once each time ExpireIdle's evictions leave the device
    // tier empty (no model resident, nothing reserved); may be empty.
    std::function<void()> on_device_empty;
#ifdef NDEBUG
    bool check_invariant = false;
#else
    bool check_invariant = true;  // CheckInvariant() after every change; aborts on violation
#endif
  };

  // INVALID_ARGUMENT for an unknown policy.
  static absl::StatusOr<std::unique_ptr<ResidencyManager>> Create(Options options);
  // Every Lease must be gone first. Stops the keep-alive thread.
  ~ResidencyManager();

  // Adds a model (ABSENT). ALREADY_EXISTS for a known name, INVALID_ARGUMENT for 0 bytes,
  // FAILED_PRECONDITION without a loader.
  absl::Status RegisterModel(const ModelSpec& spec);

  // `cancelled`, when set, is polled while the call waits for memory (every kCancelPoll at
  // least, under the manager's lock: it must not call into the manager); once it returns true
  // the call ends CANCELLED ("job cancelled while waiting for device memory for model 'm'"),
  // nothing reserved and no refusal counted.
  absl::StatusOr<Lease> Acquire(const Owner& owner, const std::string& model,
                                uint64_t working_bytes, absl::Time deadline,
                                const std::function<bool()>& cancelled = {});
  static constexpr absl::Duration kCancelPoll = absl::Milliseconds(50);
  // Reserves `bytes` of the host tier for `what` (named in messages, e.g. "stage 'upscale' CPU
  // fallback (model 'esrgan-slim-x4')"); the Lease's model() is `what`. Drops unneeded host
  // copies of weights to make room. RESOURCE_EXHAUSTED at once when `bytes` exceed the whole
  // host budget ("host tier: ... cannot fit"), DEADLINE_EXCEEDED when other host leases did not
  // end in time, CANCELLED as Acquire. A host budget of 0 (unbounded) admits everything.
  absl::StatusOr<Lease> AcquireHost(const Owner& owner, const std::string& what, uint64_t bytes,
                                    absl::Time deadline, const std::function<bool()>& cancelled = {});
  // AcquireHost's "cannot fit" answer without reserving, waiting or dropping anything: OK when
  // `bytes` fit the current host budget (or it is unbounded), else the RESOURCE_EXHAUSTED that
  // AcquireHost would return at once. For refusing a job before it works towards a stage that
  // can never be admitted; not counted as a refusal.
  absl::Status CheckHostCanFit(const std::string& what, uint64_t bytes) const;
  // Uploads and pins; FAILED_PRECONDITION when pinned bytes would exceed the budget.
  absl::Status Pin(const std::string& model, absl::Time deadline);
  absl::Status Unpin(const std::string& model);
  // Uploads without a lease (evictable).
  absl::Status Load(const std::string& model, absl::Time deadline);
  // Drops the device and host copies; FAILED_PRECONDITION if pinned, leased or in transit.
  absl::Status Unload(const std::string& model);

  // Evicts every resident model that is neither pinned nor leased (OOM ladder step 2: make all
  // the room there is before a retry). Returns the device bytes freed.
  uint64_t EvictAllEvictable();

  // Lets the eviction policy plan for the future's current state (EvictionPolicy::Prepare)
  // with no lock of the manager held: call it after the FutureReferences changed (fusiond: after
  // each QueueFutureReferences::Refresh), never from inside the manager or a policy. A no-op
  // without FutureReferences or for a policy that does not plan.
  void PrepareEviction();

  // Budget re-evaluation (periodic, from the device layer): evicts down to the new budget.
  void SetDeviceBudget(uint64_t bytes);
  void SetHostBudget(uint64_t bytes);
  // fusiond's own device usage (resident + reserved), for EffectiveBudget().
  uint64_t DeviceUsage() const;

  // Working-set estimate for (model, input-shape bucket): the largest measured peak, or
  // `fallback` before any. RecordWorkingSetPeak raises it to a measured peak.
  uint64_t WorkingSetEstimate(const std::string& model, const std::string& bucket,
                              uint64_t fallback) const;
  void RecordWorkingSetPeak(const std::string& model, const std::string& bucket, uint64_t peak);

  // Counts a stage the OOM ladder recovered by `step` (reported in Snapshot().oom_recovered).
  void RecordOomRecovery(const std::string& step);

  // Evicts to HOST every resident model whose keep-alive ran out at the clock's now, then calls
  // on_device_empty if that left the device tier empty. Returns the number evicted.
  int ExpireIdle();
  // When the next keep-alive runs out; InfiniteFuture when none is counting down.
  absl::Time NextExpiry() const;
  // Replaces Options::keep_alive (a SIGHUP reload); running countdowns are measured against the
  // new value from now on (a shorter one may make models due at once). Per-model ones stay.
  void SetKeepAlive(absl::Duration keep_alive);
  static constexpr absl::Duration kKeepAliveRecheck = absl::Seconds(1);

  ResidencySnapshot Snapshot() const;
  // OK, or INTERNAL naming the broken invariant and the numbers.
  absl::Status CheckInvariant() const;

 private:
  struct Model;
  explicit ResidencyManager(Options options, std::unique_ptr<EvictionPolicy> policy);
  friend class Lease;
  void ReleaseLease(uint64_t id);

  absl::Status MakeResident(Model* m, uint64_t working, absl::Time deadline,
                            const std::function<bool()>& cancelled = {}) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Bring(Model* m, uint64_t working, uint64_t extra) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Refuse(Model* m, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t EvictableBytes(const Model* except) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Evict(uint64_t bytes, const Model* except) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvictNow(std::vector<Model*> victims) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EnforceDeviceBudget(const Model* except) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EnforceHostBudget() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status HostCannotFitError(const std::string& what, uint64_t bytes) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropHostCopy(Model* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t HostDroppableBytes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Changed() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckInvariantLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Touch(Model* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time Now() const;
  // InfiniteFuture unless m's countdown runs (Evictable, not pinned, finite keep-alive).
  absl::Time ExpiryOf(const Model* m) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<absl::Duration> KeepAliveOf(const Model* m) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts what is due; sets *next to the next expiry among the rest. Releases the lock while
  // evicting and while calling on_device_empty.
  int ExpireDue(absl::Time* next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void KeepAliveLoop();

  const Options options_;
  const std::unique_ptr<EvictionPolicy> policy_;
  mutable Mutex mu_;
  CondVar changed_;  // signalled whenever bytes are freed or a transfer ends
  absl::flat_hash_map<std::string, std::unique_ptr<Model>> models_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<Model*> resident_ ABSL_GUARDED_BY(mu_);  // device copy exists
  absl::flat_hash_map<uint64_t, LeaseSnapshot> leases_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, LeaseSnapshot> host_leases_ ABSL_GUARDED_BY(mu_);
  uint64_t host_reserved_ ABSL_GUARDED_BY(mu_) = 0;  // bytes of host leases
  absl::flat_hash_map<std::string, uint64_t> working_sets_ ABSL_GUARDED_BY(mu_);
  uint64_t device_budget_ ABSL_GUARDED_BY(mu_);
  uint64_t host_budget_ ABSL_GUARDED_BY(mu_);
  uint64_t used_ ABSL_GUARDED_BY(mu_) = 0;      // device bytes of resident models
  uint64_t reserved_ ABSL_GUARDED_BY(mu_) = 0;  // working sets + uploads in flight
  uint64_t pinned_ ABSL_GUARDED_BY(mu_) = 0;    // device bytes of pinned models
  uint64_t peak_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t host_used_ ABSL_GUARDED_BY(mu_) = 0;  // host bytes of models with a host copy
  uint64_t host_peak_ ABSL_GUARDED_BY(mu_) = 0;
  bool over_budget_ ABSL_GUARDED_BY(mu_) = false;
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t tick_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_lease_ ABSL_GUARDED_BY(mu_) = 1;
  ResidencyCounters totals_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint64_t> oom_recovered_ ABSL_GUARDED_BY(mu_);
  absl::Duration keep_alive_ ABSL_GUARDED_BY(mu_);  // Options::keep_alive until SetKeepAlive
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;  // the keep-alive thread ends
  std::thread keep_alive_thread_;
};

}  // namespace fusion
