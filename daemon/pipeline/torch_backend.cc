// TorchBackend (torch_backend.h).
#include "pipeline/torch_backend.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "device/cpu_device_memory.h"
#include "models/blend/blend.h"
#include "models/onednn/program.h"
#include "spdlog/spdlog.h"
#include "base/status_macros.h"

namespace fusion {

std::string ResolveManifest(const std::string& configured) {
  if (!configured.empty()) return configured;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto installed = exe.parent_path().parent_path() / "share" / "fusiond" / "manifest.json";
    if (std::filesystem::exists(installed, ec)) return installed.string();
  }
  return FUSION_SOURCE_MANIFEST;
}

namespace {

// Jobs would fail later naming the file; say it once at start-up (a daemon may start before the
// weights are fetched, so this is not fatal). Existence only: hashes are checked at load.
void WarnAboutMissingWeights(const models::ModelCatalogue& catalogue, const std::string& models_dir) {
  std::vector<std::string> missing;
  for (const models::ModelSpec& m : catalogue.models()) {
    for (const models::ModelFile& f : m.files) {
      std::error_code ec;
      if (!std::filesystem::exists(catalogue.PathOf(f), ec)) {
        missing.push_back(m.name);
        break;
      }
    }
  }
  if (missing.empty()) return;
  spdlog::warn("weights of {} of {} models are missing in {} ({}); jobs using them fail until "
               "`sudo fusiond-fetch-models --models-dir {}` (installed with fusiond; in a source tree "
               "`scripts/fetch-models.sh {}`) fetches them",
               missing.size(), catalogue.models().size(), models_dir, absl::StrJoin(missing, ", "), models_dir,
               models_dir);
}

}  // namespace

absl::StatusOr<std::unique_ptr<TorchBackend>> TorchBackend::Create(const DaemonConfig& config) {
  onednn::CapIsa();  // before LibTorch or a network touches oneDNN (program.h says why)
  std::unique_ptr<TorchBackend> self(new TorchBackend());
  self->manifest_ = ResolveManifest(config.manifest);
  self->pin_models_ = config.pin_models;
  self->runner_options_.default_min_face_px = config.min_face_px;
  self->runner_options_.default_min_face_score = static_cast<float>(config.min_face_score);
  self->runner_options_.max_pixels = config.max_pixels;
  self->runner_options_.job_threads = config.job_threads;
  self->runner_options_.face_cache_bytes = config.face_cache_bytes;
  self->runner_options_.video_chunk_frames = config.video_chunk_frames;
  // Video results are files next to the journal (jobs/journal.h keeps their paths).
  self->runner_options_.results_dir = config.state_dir + "/results";
  std::error_code ec;
  std::filesystem::create_directories(self->runner_options_.results_dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("state_dir: cannot create ", self->runner_options_.results_dir, ": ", ec.message()));
  }
  ASSIGN_OR_RETURN(auto catalogue, models::ModelCatalogue::Create({self->manifest_, config.models_dir}));
  self->catalogue_ = std::move(catalogue);
  // The generator every job runs: a catalogue model of stage generate (the builtin classical one
  // or a TorchScript generator the manifest lists).
  auto generator = self->catalogue_->Get(config.generator);
  if (!generator.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("generator: '", config.generator, "' is not in the catalogue ",
                                                   self->manifest_));
  }
  if ((*generator)->stage != "generate") {
    return absl::InvalidArgumentError(absl::StrCat("generator: '", config.generator, "' is a ",
                                                   (*generator)->stage, " model, not a generator"));
  }
  self->runner_options_.generator = config.generator;
  if (config.device == "cpu") {
    self->meter_ = MakeCpuDeviceMeter(0);  // the budget watcher sets the budget at once
  } else {
#ifdef FUSION_WITH_CUDA
    self->meter_ = MakeCudaDeviceMeter(std::stoi(config.device.substr(5)));
#else
    return absl::FailedPreconditionError(absl::StrCat(
        "device '", config.device, "': this fusiond's LibTorch has no CUDA; use --device cpu"));
#endif
  }
  ASSIGN_OR_RETURN(self->store_, ModelStore::Create(self->catalogue_.get(), {.device = config.device, .meter = self->meter_.get()}));
  ASSIGN_OR_RETURN(auto faults, FaultInjector::FromEnvironment());
  self->faults_ = std::make_unique<FaultInjector>(faults);
  // Else the first job's full blend builds OpenCV's Lab tables (its blend stage 215 ms, the next
  // job's 60, on Grace x3 with the astronaut as source).
  models::PrepareBlend();
  spdlog::info("model catalogue {} ({} models), weights in {}", self->manifest_,
               self->catalogue_->models().size(), config.models_dir);
  WarnAboutMissingWeights(*self->catalogue_, config.models_dir);
  return self;
}

absl::StatusOr<jobs::JobRunner*> TorchBackend::Start(ResidencyManager& residency) {
  RETURN_IF_ERROR(store_->RegisterAll(residency));
  for (const std::string& name : pin_models_) {
    if (!catalogue_->Get(name).ok()) {
      return absl::InvalidArgumentError(absl::StrCat("pin_models: '", name, "' is not in the catalogue"));
    }
    if (absl::Status st = residency.Pin(name, absl::Now() + absl::Seconds(60)); !st.ok()) {
      spdlog::warn("pin_models: cannot pin '{}': {}", name, st.ToString());
    }
  }
  runner_ = std::make_unique<PipelineRunner>(store_.get(), &residency, meter_.get(), faults_.get(), runner_options_);
  return runner_.get();
}

void TorchBackend::OnDeviceBudget(uint64_t bytes) {
  if (store_->device() == "cpu") CpuDeviceAllocator::Install(bytes);  // same allocator; sets its budget
}

void TorchBackend::OnDeviceEmpty() { meter_->ReleaseCache(); }

void TorchBackend::Stop() {
  if (runner_ != nullptr && runner_->face_cache() != nullptr) runner_->face_cache()->Clear();
}

namespace jobs {

absl::StatusOr<std::unique_ptr<Backend>> CreateBackend(const DaemonConfig& config) {
  ASSIGN_OR_RETURN(auto backend, TorchBackend::Create(config));
  return std::unique_ptr<Backend>(std::move(backend));
}

absl::Status BackendSupportsDevice(const std::string& device) {
#ifndef FUSION_WITH_CUDA
  if (device.rfind("cuda:", 0) == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device ", device, " is not available: this fusiond is a CPU-only build (its LibTorch has no CUDA); "
        "use --device cpu, or build it with scripts/build-cuda.sh"));
  }
#endif
  return absl::OkStatus();
}

}  // namespace jobs
}  // namespace fusion
