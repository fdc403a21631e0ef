// FaceCache (pipeline/face_cache.h): hits and misses, LRU eviction at capacity, the entries'
// bytes charged to the host tier in slabs and returned, and what happens when the host tier
// has no room. No LibTorch.
#include "pipeline/face_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "fake_loader.h"

namespace fusion {
namespace {

constexpr uint64_t kKiB = 1024;

FaceAnalysis Analysis(float x, int turned = 0) {
  FaceAnalysis a;
  a.face.box.x = x;
  a.face.box.w = 100;
  for (size_t i = 0; i < a.face.landmarks.size(); ++i) a.face.landmarks[i] = {x + i, 2.0f * i};
  for (size_t i = 0; i < a.face.descriptor.size(); ++i) a.face.descriptor[i] = x / (i + 1);
  a.face.described = true;
  for (int i = 0; i < turned; ++i) a.turned.push_back(TurnedFace{.upright_turns = 1});
  return a;
}

class FaceCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    residency_ = *ResidencyManager::Create({.device_budget_bytes = 64 * kKiB * kKiB,
                                            .host_budget_bytes = 1024 * kKiB, .loader = &loader_});
  }
  uint64_t HostReserved() const { return residency_->Snapshot().host.reserved_bytes; }
  std::string Key(const std::string& bytes) const { return FaceCache::Key(bytes, "|ssd|68|rec|cpu|40|0|1024"); }

  testing::FakeLoader loader_;
  std::unique_ptr<ResidencyManager> residency_;
};

TEST_F(FaceCacheTest, KeyIsTheContentDigestPlusTheSettings) {
  const std::string a = FaceCache::Key("image bytes", "|s1");
  EXPECT_EQ(a.size(), 32u + 3u);
  EXPECT_EQ(a, FaceCache::Key(std::string("image bytes"), "|s1"));
  EXPECT_NE(a, FaceCache::Key("image bytez", "|s1"));
  EXPECT_NE(a, FaceCache::Key("image bytes", "|s2"));
}

TEST_F(FaceCacheTest, AHitReturnsTheStoredAnalysisAndCountsHitsAndMisses) {
  FaceCache cache(residency_.get(), {});
  EXPECT_FALSE(cache.Lookup(Key("a")).has_value());
  cache.Insert(Key("a"), Analysis(7, 2));
  auto hit = cache.Lookup(Key("a"));
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->face.box.x, 7);
  EXPECT_EQ(hit->face.landmarks[5].x, 12);
  EXPECT_EQ(hit->face.descriptor[3], 7.0f / 4);
  EXPECT_TRUE(hit->face.described);
  EXPECT_EQ(hit->turned.size(), 2u);
  EXPECT_FALSE(cache.Lookup(Key("b")).has_value());
  const FaceCache::Stats s = cache.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.insertions, 1u);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_EQ(s.bytes, FaceCache::EntryBytes(Key("a"), Analysis(7, 2)));
  // One entry is ~1.2 KB: a 128-d float descriptor, 68 points, the box.
  EXPECT_GT(s.bytes, 128u * 4 + 68u * 8);
  EXPECT_LT(s.bytes, 2 * kKiB);
}

TEST_F(FaceCacheTest, EntriesAreChargedToTheHostTierInSlabsAndClearReturnsThem) {
  FaceCache cache(residency_.get(), {.capacity_bytes = 512 * kKiB, .slab_bytes = 16 * kKiB});
  EXPECT_EQ(HostReserved(), 0u) << "an empty cache holds nothing";
  const uint64_t entry = FaceCache::EntryBytes(Key("0"), Analysis(0));
  const int n = static_cast<int>(40 * kKiB / entry) + 1;  // just over 40 KiB: 3 slabs
  for (int i = 0; i < n; ++i) cache.Insert(Key(std::to_string(i)), Analysis(i));
  const FaceCache::Stats s = cache.stats();
  EXPECT_EQ(s.entries, static_cast<uint64_t>(n));
  EXPECT_EQ(s.bytes, n * entry);
  EXPECT_EQ(s.charged_bytes, 48 * kKiB);
  EXPECT_EQ(HostReserved(), 48 * kKiB);
  ASSERT_EQ(residency_->Snapshot().host_leases.size(), 3u);
  EXPECT_EQ(residency_->Snapshot().host_leases[0].model, "the source-face cache");
  cache.Insert(Key("0"), Analysis(100));  // replacing an entry keeps one copy
  EXPECT_EQ(cache.stats().entries, static_cast<uint64_t>(n));
  EXPECT_EQ(cache.Lookup(Key("0"))->face.box.x, 100);
  cache.Clear();
  EXPECT_EQ(cache.stats().bytes, 0u);
  EXPECT_EQ(cache.stats().charged_bytes, 0u);
  EXPECT_EQ(HostReserved(), 0u);
  EXPECT_FALSE(cache.Lookup(Key("1")).has_value());
}

TEST_F(FaceCacheTest, TheLeastRecentlyUsedEntryIsEvictedAtCapacity) {
  const uint64_t entry = FaceCache::EntryBytes(Key("a"), Analysis(0));
  FaceCache cache(residency_.get(), {.capacity_bytes = 3 * entry, .slab_bytes = 4 * kKiB});
  for (const char* k : {"a", "b", "c"}) cache.Insert(Key(k), Analysis(1));
  ASSERT_TRUE(cache.Lookup(Key("a")).has_value());  // a is now the most recently used
  cache.Insert(Key("d"), Analysis(2));
  EXPECT_FALSE(cache.Lookup(Key("b")).has_value()) << "b was the least recently used";
  for (const char* k : {"a", "c", "d"}) EXPECT_TRUE(cache.Lookup(Key(k)).has_value()) << k;
  const FaceCache::Stats s = cache.stats();
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.entries, 3u);
  EXPECT_LE(s.bytes, 3 * entry);
  EXPECT_EQ(s.charged_bytes, 4 * kKiB);
  EXPECT_EQ(HostReserved(), 4 * kKiB);
}

TEST_F(FaceCacheTest, AFullHostTierEvictsOlderEntriesOrStoresNothing) {
  FaceCache cache(residency_.get(), {.capacity_bytes = 512 * kKiB, .slab_bytes = 16 * kKiB});
  // Everything but one slab of the 1 MiB host tier is another computation's.
  auto other = residency_->AcquireHost(Owner{"job", 0}, "other", 1024 * kKiB - 16 * kKiB, absl::Now());
  ASSERT_TRUE(other.ok()) << other.status();
  const uint64_t entry = FaceCache::EntryBytes(Key("0"), Analysis(0));
  const int fit = static_cast<int>(16 * kKiB / entry);
  for (int i = 0; i < fit + 5; ++i) cache.Insert(Key(std::to_string(i)), Analysis(i));
  FaceCache::Stats s = cache.stats();
  EXPECT_EQ(s.charged_bytes, 16 * kKiB) << "no second slab: the host tier is full";
  EXPECT_EQ(s.entries, static_cast<uint64_t>(fit));
  EXPECT_EQ(s.evictions, 5u);
  EXPECT_EQ(s.refused, 0u);
  EXPECT_TRUE(cache.Lookup(Key(std::to_string(fit + 4))).has_value()) << "the newest is kept";
  EXPECT_FALSE(cache.Lookup(Key("0")).has_value()) << "the oldest went";
  EXPECT_EQ(HostReserved(), 1024 * kKiB);
  // With no slab at all, nothing is stored and nothing is charged.
  cache.Clear();
  auto rest = residency_->AcquireHost(Owner{"job", 0}, "rest", 16 * kKiB, absl::Now());
  ASSERT_TRUE(rest.ok()) << rest.status();
  cache.Insert(Key("x"), Analysis(1));
  s = cache.stats();
  EXPECT_EQ(s.refused, 1u);
  EXPECT_EQ(s.entries, 0u);
  EXPECT_EQ(s.charged_bytes, 0u);
  EXPECT_FALSE(cache.Lookup(Key("x")).has_value());
}

}  // namespace
}  // namespace fusion
