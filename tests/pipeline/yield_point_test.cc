// Yield points with the real networks (pipeline_env.h): the runner offers one before every
// stage and before the result's encode, and at each the job holds no device lease, so the work
// it yields to is admitted as if it ran alone (docs/ARCHITECTURE.md#priorities-and-yielding).
// What the device may still have reserved there is the prefetch of the next stage's model
// (Execution::Prefetch), an upload in flight under no lease that ends on its own.
#include <gtest/gtest.h>

#include <algorithm>

#include "pipeline_env.h"

namespace fusion {
namespace {

// Records, at each yield point, the stage events so far and the device's leases and
// reservations, and whether a model was coming up (LOADING / UPLOADING) then.
class YieldRecorder : public Recorder {
 public:
  void YieldPoint() override {
    const ResidencySnapshot s = E().residency->Snapshot();
    events_at_yield.push_back(started.size());
    device_leases += s.leases.size();
    const bool coming = std::any_of(s.models.begin(), s.models.end(), [](const ModelSnapshot& m) {
      return m.state == ModelState::kLoading || m.state == ModelState::kUploading;
    });
    if (s.device.reserved_bytes > 0 && !coming) ++reserved_without_upload;
  }
  std::vector<size_t> events_at_yield;  // started.size() at each yield point
  size_t device_leases = 0;             // summed over the yield points
  int reserved_without_upload = 0;      // yield points with bytes reserved and no upload
};

TEST(YieldPoint, EveryStageAndTheEncodeStartAtOneWhereNoDeviceLeaseIsHeld) {
  YieldRecorder rec;
  auto out = Swap(Ratio(1), Grace(), &rec);
  ASSERT_TRUE(out.ok()) << out.status();
  // One yield point per stage report (the blend, a host stage, included), one before the encode.
  const size_t stages = static_cast<size_t>(out->report.stages_size());
  ASSERT_GE(stages, 5u);  // detect, landmarks, encode, generate, blend at least
  EXPECT_EQ(rec.events_at_yield.size(), stages + 1);
  // Each before its stage's first event: a stage's events all fall between two yield points.
  ASSERT_FALSE(rec.events_at_yield.empty());
  EXPECT_EQ(rec.started[rec.events_at_yield.front()], "detect");
  EXPECT_TRUE(std::is_sorted(rec.events_at_yield.begin(), rec.events_at_yield.end()));
  EXPECT_EQ(rec.events_at_yield.back(), rec.started.size());  // the encode's: every stage ran
  EXPECT_EQ(rec.device_leases, 0u);
  EXPECT_EQ(rec.reserved_without_upload, 0);
  ExpectAtRest();
}

}  // namespace
}  // namespace fusion
