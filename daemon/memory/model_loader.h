// ModelLoader: how the residency manager moves a model's weights between tiers.
//
// The models component implements it with LibTorch (load: read + deserialize into host
// tensors; upload: copy to the device inside the model's device scope; release: drop a copy).
// Tests and bench/residency_trace use fakes that log calls. The manager never holds its lock
// across LoadToHost, Upload or ReleaseDevice (on CUDA the latter may call emptyCache), and never
// calls two of them concurrently for the same model. ReleaseHost (freeing RAM) is called with
// the manager's lock held: it must not block or call back into the manager.
// Thread-safety: implementations must accept calls for different models from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace fusion {

class ModelLoader {
 public:
  virtual ~ModelLoader() = default;
  // STORAGE -> HOST. Returns the host copy's measured bytes. Errors pass through to the caller
  // of Load/Acquire (e.g. NOT_FOUND for a missing file, INTERNAL for a corrupt one).
  virtual absl::StatusOr<uint64_t> LoadToHost(const std::string& model) = 0;
  // HOST -> DEVICE. Returns the device copy's measured bytes (parameters + buffers, dtype-aware).
  virtual absl::StatusOr<uint64_t> Upload(const std::string& model) = 0;
  // Drops the device copy (the host copy stays).
  virtual void ReleaseDevice(const std::string& model) = 0;
  // Drops the host copy (the model is back in STORAGE only).
  virtual void ReleaseHost(const std::string& model) = 0;
};

}  // namespace fusion
