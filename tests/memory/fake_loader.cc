#include "fake_loader.h"

#include <chrono>
#include <cstdlib>
#include <thread>

#include "absl/strings/match.h"

namespace fusion::testing {

void FakeLoader::SetBytes(const std::string& model, uint64_t bytes) {
  std::lock_guard l(mu_);
  bytes_[model] = bytes;
}

absl::StatusOr<uint64_t> FakeLoader::LoadToHost(const std::string& model) {
  std::lock_guard l(mu_);
  log_.push_back("load " + model);
  auto it = bytes_.find(model);
  if (it == bytes_.end()) return absl::NotFoundError("fake loader: no file for '" + model + "'");
  if (!on_host_.insert(model).second) std::abort();  // the manager loaded twice
  return it->second;
}

absl::StatusOr<uint64_t> FakeLoader::Upload(const std::string& model) {
  if (upload_delay_us_ > 0) std::this_thread::sleep_for(std::chrono::microseconds(upload_delay_us_));
  if (during_upload) during_upload(model);
  std::lock_guard l(mu_);
  log_.push_back("upload " + model);
  if (!on_host_.contains(model)) std::abort();  // an upload needs the host copy
  if (fail_upload_.contains(model)) return absl::InternalError("fake upload failure: " + model);
  if (!on_device_.insert(model).second) std::abort();  // the manager uploaded twice
  return bytes_.at(model);
}

void FakeLoader::ReleaseDevice(const std::string& model) {
  std::lock_guard l(mu_);
  log_.push_back("release_device " + model);
  if (on_device_.erase(model) != 1) std::abort();  // released something not on the device
}

void FakeLoader::ReleaseHost(const std::string& model) {
  std::lock_guard l(mu_);
  log_.push_back("release_host " + model);
  if (on_host_.erase(model) != 1) std::abort();  // released a host copy that is not there
}

int FakeLoader::Count(const std::string& prefix) const {
  std::lock_guard l(mu_);
  int n = 0;
  for (const std::string& entry : log_) n += absl::StartsWith(entry, prefix) ? 1 : 0;
  return n;
}

}  // namespace fusion::testing
