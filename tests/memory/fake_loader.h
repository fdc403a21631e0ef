// FakeLoader: a ModelLoader that moves no weights and logs every call ("load a", "upload a",
// "release_device a", "release_host a"). Measured bytes default to the catalogue figure and
// can be overridden; failures can be injected. It aborts on a broken loader contract: a load of
// a model already on the host, an upload without a host copy or twice, a release of a copy that
// is not there. Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "memory/model_loader.h"

namespace fusion::testing {

class FakeLoader final : public ModelLoader {
 public:
  // Registers the bytes a load/upload of `model` reports.
  void SetBytes(const std::string& model, uint64_t bytes);
  void FailUpload(const std::string& model) { std::lock_guard l(mu_); fail_upload_.insert(model); }
  // Sleeps this long in each upload (to widen race windows in concurrent tests).
  void SetUploadDelayMicros(int us) { upload_delay_us_ = us; }
  // Runs inside every Upload, before it returns (e.g. to call back into the manager).
  std::function<void(const std::string&)> during_upload;

  absl::StatusOr<uint64_t> LoadToHost(const std::string& model) override;
  absl::StatusOr<uint64_t> Upload(const std::string& model) override;
  void ReleaseDevice(const std::string& model) override;
  void ReleaseHost(const std::string& model) override;

  std::vector<std::string> log() const { std::lock_guard l(mu_); return log_; }
  void ClearLog() { std::lock_guard l(mu_); log_.clear(); }
  // How many of the logged calls start with `prefix` (e.g. "upload ").
  int Count(const std::string& prefix) const;

 private:
  mutable std::mutex mu_;
  absl::flat_hash_map<std::string, uint64_t> bytes_;
  absl::flat_hash_set<std::string> fail_upload_;
  absl::flat_hash_set<std::string> on_device_;  // detects a double upload or release
  absl::flat_hash_set<std::string> on_host_;    // detects a double load, an upload from storage
  std::vector<std::string> log_;
  int upload_delay_us_ = 0;
};

}  // namespace fusion::testing
