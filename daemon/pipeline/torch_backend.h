// TorchBackend: the LibTorch pipeline as the daemon's Backend (jobs/backend.h) — the model
// catalogue, the device meter (on `cpu` the budget-enforcing allocator is installed, its budget
// kept equal to the device budget), the model store (the residency manager's loader), fault
// injection (FUSIOND_FAULTS, test builds only) and the PipelineRunner.
// config.pin_models are pinned at Start (an unknown name stops the daemon with
// INVALID_ARGUMENT; a pin that does not fit is a warning).
// Manifest: config.manifest; else <directory of the fusiond binary>/../share/fusiond/manifest.json
// when it exists (cmake --install puts it there); else the source tree's models/manifest.json
// compiled in (running from a build tree). Weights come from config.models_dir.
// Errors: the catalogue's INVALID_ARGUMENT / NOT_FOUND (naming the manifest), FAILED_PRECONDITION
// for cuda without a CUDA LibTorch, INVALID_ARGUMENT for a bad FUSIOND_FAULTS.
// Thread-safety: as Backend's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"
#include "jobs/backend.h"
#include "loader/model_store.h"
#include "pipeline/pipeline_runner.h"

namespace fusion {

class TorchBackend final : public jobs::Backend {
 public:
  static absl::StatusOr<std::unique_ptr<TorchBackend>> Create(const DaemonConfig& config);

  ModelLoader* loader() override { return store_.get(); }
  const models::ModelCatalogue* catalogue() const override { return catalogue_.get(); }
  absl::StatusOr<jobs::JobRunner*> Start(ResidencyManager& residency) override;
  jobs::LiveRunner* live_runner() override { return runner_.get(); }
  void OnDeviceBudget(uint64_t bytes) override;
  // DeviceMeter::ReleaseCache (CUDA emptyCache; nothing on the CPU device).
  void OnDeviceEmpty() override;
  void Stop() override;

  // The manifest path Create used.
  const std::string& manifest() const { return manifest_; }

 private:
  TorchBackend() = default;
  std::string manifest_;
  std::vector<std::string> pin_models_;
  PipelineRunner::Options runner_options_;
  std::unique_ptr<models::ModelCatalogue> catalogue_;
  std::unique_ptr<DeviceMeter> meter_;
  std::unique_ptr<ModelStore> store_;
  std::unique_ptr<FaultInjector> faults_;
  std::unique_ptr<PipelineRunner> runner_;
};

// The manifest path for `configured` (empty = default) as described above.
std::string ResolveManifest(const std::string& configured);

}  // namespace fusion
