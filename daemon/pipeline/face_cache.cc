// FaceCache (face_cache.h).
#include "pipeline/face_cache.h"

#include <openssl/evp.h>

#include <memory>
#include <utility>

#include "absl/time/clock.h"

namespace fusion {
namespace {

// A list node and a hash-map slot with its key's heap copy: what an entry costs beyond itself.
constexpr uint64_t kNodeOverhead = 96;

}  // namespace

FaceCache::FaceCache(ResidencyManager* residency, Options options)
    : residency_(residency), options_(options) {}

FaceCache::~FaceCache() { Clear(); }

std::string FaceCache::Key(std::string_view image_bytes, std::string_view settings) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(image_bytes.data(), image_bytes.size(), digest, &len, EVP_sha256(), nullptr);
  std::string key(reinterpret_cast<const char*>(digest), len);
  key.append(settings);
  return key;
}

uint64_t FaceCache::EntryBytes(const std::string& key, const FaceAnalysis& a) {
  return sizeof(Entry) + a.turned.capacity() * sizeof(TurnedFace) + 2 * key.size() + kNodeOverhead;
}

std::optional<FaceAnalysis> FaceCache::Lookup(const std::string& key) {
  MutexLock l(&mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.misses;
    return std::nullopt;
  }
  ++stats_.hits;
  lru_.splice(lru_.begin(), lru_, it->second);
  return it->second->analysis;
}

void FaceCache::Insert(const std::string& key, FaceAnalysis analysis) {
  const uint64_t bytes = EntryBytes(key, analysis);
  MutexLock l(&mu_);
  if (auto it = index_.find(key); it != index_.end()) {  // replaced: its bytes go first
    stats_.bytes -= it->second->bytes;
    lru_.erase(it->second);
    index_.erase(it);
    --stats_.entries;
  }
  if (bytes > options_.capacity_bytes) {
    ++stats_.refused;
    ReleaseUnused();
    return;
  }
  while (stats_.bytes + bytes > options_.capacity_bytes) EvictLast();
  // Room on the host tier: more slabs, else older entries go until the held slabs hold it.
  if (!ChargeFor(stats_.bytes + bytes)) {
    while (!lru_.empty() && stats_.bytes + bytes > stats_.charged_bytes) EvictLast();
    if (stats_.bytes + bytes > stats_.charged_bytes) {
      ++stats_.refused;
      ReleaseUnused();
      return;
    }
  }
  lru_.push_front(Entry{key, std::move(analysis), bytes});
  index_[key] = lru_.begin();
  stats_.bytes += bytes;
  ++stats_.entries;
  ++stats_.insertions;
  ReleaseUnused();
}

void FaceCache::Clear() {
  MutexLock l(&mu_);
  index_.clear();
  lru_.clear();
  stats_.bytes = 0;
  stats_.entries = 0;
  ReleaseUnused();
}

FaceCache::Stats FaceCache::stats() const {
  MutexLock l(&mu_);
  return stats_;
}

void FaceCache::EvictLast() {
  const Entry& e = lru_.back();
  stats_.bytes -= e.bytes;
  index_.erase(e.key);
  lru_.pop_back();
  --stats_.entries;
  ++stats_.evictions;
}

// Without a residency manager the slabs are counted (charged_bytes) but no lease is held.
bool FaceCache::ChargeFor(uint64_t bytes) {
  while (stats_.charged_bytes < bytes) {
    if (residency_ != nullptr) {
      auto slab = residency_->AcquireHost(Owner{kCacheOwnerJob, 0}, "the source-face cache", options_.slab_bytes,
                                          absl::Now());
      if (!slab.ok()) return false;
      slabs_.push_back(*std::move(slab));
    }
    stats_.charged_bytes += options_.slab_bytes;
  }
  return true;
}

void FaceCache::ReleaseUnused() {
  while (stats_.charged_bytes >= options_.slab_bytes && stats_.charged_bytes - options_.slab_bytes >= stats_.bytes) {
    if (!slabs_.empty()) slabs_.pop_back();  // the Lease returns its bytes as it goes
    stats_.charged_bytes -= options_.slab_bytes;
  }
}

}  // namespace fusion
