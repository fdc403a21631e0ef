// The source-face cache in the job (PipelineRunner::Options::face_cache_bytes, face_cache.h):
// a warm job gives the bytes and report of a job without the cache, and skips the source's
// (and reference's) detection, landmarks and descriptor; hits, misses and bytes are counted.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "pipeline/face_cache.h"
#include "pipeline/pipeline_runner.h"
#include "pipeline_env.h"

namespace fusion {
namespace {

PipelineRunner::Options Cached() {
  PipelineRunner::Options options;
  options.face_cache_bytes = 1ull << 20;
  return options;
}

int Count(const std::vector<std::string>& v, const std::string& s) {
  return static_cast<int>(std::count(v.begin(), v.end(), s));
}

// What a job's report says apart from timings: faces, boxes, distances, stages run.
void ExpectSameResult(const jobs::JobRunner::Output& a, const jobs::JobRunner::Output& b) {
  EXPECT_TRUE(a.image == b.image) << "the same image bytes";
  EXPECT_EQ(a.report.faces_swapped(), b.report.faces_swapped());
  ASSERT_EQ(a.report.faces_size(), b.report.faces_size());
  for (int i = 0; i < a.report.faces_size(); ++i) {
    for (int k = 0; k < 4; ++k) EXPECT_EQ(a.report.faces(i).box(k), b.report.faces(i).box(k));
    EXPECT_EQ(a.report.faces(i).identity_distance(), b.report.faces(i).identity_distance());
    EXPECT_EQ(a.report.faces(i).target_identity_distance(), b.report.faces(i).target_identity_distance());
  }
}

TEST(FaceCacheJob, AWarmJobGivesTheColdJobsBytesWithoutTheSourcesStages) {
  v1::JobOptions o;
  o.set_ratio(1);
  o.set_min_face_px(120);  // the group photo's faces are 180-240 px: a few passes
  const std::string target = ReadFile(FUSION_TESTDATA_DIR "/faces/sample1.jpg");
  Recorder plain;
  auto uncached = Swap(o, target, &plain);  // the environment's runner: no cache
  ASSERT_TRUE(uncached.ok()) << uncached.status();
  {
    PipelineRunner runner(E().store.get(), E().residency.get(), E().meter.get(), nullptr, Cached());
    ASSERT_NE(runner.face_cache(), nullptr);
    Recorder cold, warm;
    auto first = runner.Swap(Owner{"face-cache", 0}, Astronaut(), target, o, cold);
    ASSERT_TRUE(first.ok()) << first.status();
    FaceCache::Stats s = runner.face_cache()->stats();
    EXPECT_EQ(s.misses, 1u);
    EXPECT_EQ(s.hits, 0u);
    EXPECT_EQ(s.entries, 1u);
    EXPECT_EQ(s.charged_bytes, 64u << 10) << "one slab";
    EXPECT_EQ(E().residency->Snapshot().host.reserved_bytes, 64u << 10) << "the slab, charged to the host tier";
    auto second = runner.Swap(Owner{"face-cache", 0}, Astronaut(), target, o, warm);
    ASSERT_TRUE(second.ok()) << second.status();
    s = runner.face_cache()->stats();
    EXPECT_EQ(s.hits, 1u);
    EXPECT_EQ(s.misses, 1u);
    EXPECT_EQ(s.entries, 1u);
    ExpectSameResult(*uncached, *first);
    ExpectSameResult(*uncached, *second);
    EXPECT_EQ(warm.degradations, plain.degradations);
    // The cold job describes the source (encode); the warm one has nothing to describe.
    EXPECT_EQ(Count(cold.started, "encode"), 1);
    EXPECT_EQ(Count(warm.started, "encode"), 0);
    EXPECT_EQ(StageOf(second->report, "encode"), nullptr);
    // Its detection scanned the target only: no progress note names the source.
    for (const std::string& st : warm.started) EXPECT_EQ(st.find("source image"), std::string::npos) << st;
    EXPECT_NE(std::find_if(cold.started.begin(), cold.started.end(),
                           [](const std::string& st) { return st.find("source image") != std::string::npos; }),
              cold.started.end());
    // Other options of the scan are another key: a miss.
    o.set_min_face_px(130);
    Recorder other;
    ASSERT_TRUE(runner.Swap(Owner{"face-cache", 0}, Astronaut(), target, o, other).ok());
    EXPECT_EQ(runner.face_cache()->stats().misses, 2u);
    EXPECT_EQ(runner.face_cache()->stats().entries, 2u);
  }
  EXPECT_EQ(E().residency->Snapshot().host.reserved_bytes, 0u) << "the cache's slabs went with it";
  ExpectAtRest();
}

TEST(FaceCacheJob, AReferenceImageIsCachedAsTheSourceIs) {
  v1::JobOptions o;
  o.set_ratio(1);
  o.set_faces(v1::REFERENCE);
  o.mutable_reference()->set_inline_bytes(Grace());
  auto uncached = Swap(o, Grace());
  ASSERT_TRUE(uncached.ok()) << uncached.status();
  PipelineRunner runner(E().store.get(), E().residency.get(), E().meter.get(), nullptr, Cached());
  Recorder cold, warm;
  auto first = runner.Swap(Owner{"face-cache", 0}, Astronaut(), Grace(), o, cold);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(runner.face_cache()->stats().entries, 2u) << "the source and the reference";
  auto second = runner.Swap(Owner{"face-cache", 0}, Astronaut(), Grace(), o, warm);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(runner.face_cache()->stats().hits, 2u);
  ExpectSameResult(*uncached, *second);
  EXPECT_EQ(Count(warm.started, "encode"), 1) << "the target's faces are still described";
}

}  // namespace
}  // namespace fusion
