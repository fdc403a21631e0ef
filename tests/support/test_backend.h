// TestBackend: a jobs::Backend made of a test's own parts, for an in-process Daemon
// (daemon/daemon.h). Start() calls `start` when set (it registers models and may return a
// runner), else returns `runner`.
#pragma once

#include <functional>
#include <memory>

#include "jobs/backend.h"
#include "jobs/job_runner.h"
#include "memory/model_loader.h"
#include "memory/residency_manager.h"

namespace fusion::testing {

struct TestBackend final : jobs::Backend {
  jobs::JobRunner* runner = nullptr;
  ModelLoader* model_loader = nullptr;
  const models::ModelCatalogue* model_catalogue = nullptr;
  std::function<absl::StatusOr<jobs::JobRunner*>(ResidencyManager&)> start;

  ModelLoader* loader() override { return model_loader; }
  const models::ModelCatalogue* catalogue() const override { return model_catalogue; }
  absl::StatusOr<jobs::JobRunner*> Start(ResidencyManager& residency) override {
    return start ? start(residency) : runner;
  }
};

// A backend that only runs jobs with `runner` (not owned).
inline std::unique_ptr<jobs::Backend> RunnerBackend(jobs::JobRunner* runner) {
  auto backend = std::make_unique<TestBackend>();
  backend->runner = runner;
  return backend;
}

}  // namespace fusion::testing
