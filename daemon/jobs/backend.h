// Backend: what runs jobs inside a Daemon — the residency manager's model loader and the job
// runner built over the residency manager. The LibTorch pipeline is this build's backend
// (pipeline/torch_backend.h); tests give their own; a build without LibTorch has none, and its
// daemon serves the memory methods only (job and model methods answer UNIMPLEMENTED).
//
// Order (the Daemon's, docs/ARCHITECTURE.md#start-and-stop): loader() when the residency
// manager is made; Start() once it exists, before any job runs; OnDeviceBudget() with every
// budget the BudgetWatcher sets, from its thread; Stop() once no job runs and no call is
// served, before the residency manager goes.
// Thread-safety: Start and Stop from the daemon's controlling thread; the loader and the
// runner are called from many threads (their own contracts).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fusion {

struct DaemonConfig;
class ModelLoader;
class ResidencyManager;
namespace models {
class ModelCatalogue;
}

namespace jobs {

class JobRunner;
class LiveRunner;

class Backend {
 public:
  virtual ~Backend() = default;

  // The residency manager's loader; null = no models can be registered.
  virtual ModelLoader* loader() = 0;
  // The catalogue ListModels, LoadModel and PinModel serve; null = they answer UNIMPLEMENTED.
  virtual const models::ModelCatalogue* catalogue() const = 0;
  // Registers the models with `residency`, pins what the configuration pins and builds the job
  // runner over it. Returns the runner (owned by the backend; null = no job methods) or the
  // reason the daemon cannot start.
  virtual absl::StatusOr<JobRunner*> Start(ResidencyManager& residency) = 0;
  // The live sessions' runner once Start() returned (null: the Live method answers
  // UNIMPLEMENTED). Owned by the backend.
  virtual LiveRunner* live_runner() { return nullptr; }
  // The device budget changed to `bytes`.
  virtual void OnDeviceBudget(uint64_t bytes) {}
  // The keep-alive left nothing resident on the device: return what the device allocator
  // still caches to the driver. From the residency manager's keep-alive thread.
  virtual void OnDeviceEmpty() {}
  // Returns the leases the backend still holds (caches built over the residency manager).
  virtual void Stop() {}
};

// This build's backend for `config`, or null when the build has none (no LibTorch). Defined by
// the backend linked into fusiond: pipeline/torch_backend.cc, or daemon/no_backend.cc.
// Errors: the backend's (a manifest that does not parse, a generator not in the catalogue).
absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const DaemonConfig& config);
// OK when this build's backend can run on `device` ("cpu", "cuda:N"); FAILED_PRECONDITION naming
// what is missing (a CPU-only LibTorch asked for cuda:N). The device's own presence is
// OpenDevice's to check.
absl::Status BackendSupportsDevice(const std::string& device);

}  // namespace jobs
}  // namespace fusion
