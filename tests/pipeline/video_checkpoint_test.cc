// The tracking checkpoint (pipeline/video_checkpoint.h): a point filter saved with a chunk and
// restored by a resumed job continues exactly as the filter that was never stopped.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "geometry/face_track.h"
#include "pipeline/video_checkpoint.h"

namespace fusion {
namespace {

// A face's 68 points about (cx, cy), wobbling with t (the landmark net's noise, made).
faceapi::Landmarks68 Points(float cx, float cy, int t) {
  faceapi::Landmarks68 l;
  for (size_t i = 0; i < l.size(); ++i) {
    const float a = static_cast<float>(i) * 0.37f;
    l[i] = {cx + 40 * std::cos(a) + 0.8f * std::sin(0.9f * t + i), cy + 50 * std::sin(a) + 0.8f * std::cos(1.3f * t + i)};
  }
  return l;
}

TEST(VideoCheckpoint, ARestoredFilterContinuesBitForBitAsTheOneNeverStopped) {
  const double dt = 1.0 / 25;
  geometry::OneEuroPoints uninterrupted;
  for (int t = 0; t < 30; ++t) uninterrupted.Filter(Points(100 + 3.f * t, 200, t), dt);  // a chunk
  internal::VideoTrackerState state;
  SaveFilter(7, uninterrupted, state.add_filters());
  const std::string bytes = state.SerializeAsString();

  internal::VideoTrackerState parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  ASSERT_EQ(parsed.filters_size(), 1);
  EXPECT_EQ(parsed.filters(0).track(), 7u);
  geometry::OneEuroPoints resumed;
  ASSERT_TRUE(LoadFilter(parsed.filters(0), &resumed));
  geometry::OneEuroPoints fresh;  // what a chunk starting afresh would do
  double fresh_gap = 0;
  for (int t = 30; t < 60; ++t) {
    const faceapi::Landmarks68 raw = Points(100 + 3.f * t, 200, t);
    const faceapi::Landmarks68 a = uninterrupted.Filter(raw, dt), b = resumed.Filter(raw, dt), c = fresh.Filter(raw, dt);
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].x, b[i].x) << "frame " << t << " point " << i;
      ASSERT_EQ(a[i].y, b[i].y) << "frame " << t << " point " << i;
      if (t == 30) fresh_gap += std::hypot(a[i].x - c[i].x, a[i].y - c[i].y) / a.size();
    }
  }
  // Starting afresh instead passes the raw points through: a jump of the steadied face.
  EXPECT_GT(fresh_gap, 0.3);
}

TEST(VideoCheckpoint, AStateOfTheWrongShapeIsRefusedAndChangesNothing) {
  faceapi::Landmarks68 points = Points(10, 20, 0);
  const faceapi::Landmarks68 before = points;
  google::protobuf::RepeatedField<float> short_points;
  for (int i = 0; i < 135; ++i) short_points.Add(1.f);
  EXPECT_FALSE(LoadPoints(short_points, &points));
  EXPECT_EQ(points[67].x, before[67].x);

  geometry::OneEuroPoints filter;
  filter.Filter(Points(10, 20, 0), 0.04);
  internal::FilterState state;
  SaveFilter(1, filter, &state);
  state.mutable_pose()->RemoveLast();  // 5 of the 6 pose values
  geometry::OneEuroPoints target;
  EXPECT_FALSE(LoadFilter(state, &target));
  EXPECT_FALSE(target.state().started);
}

}  // namespace
}  // namespace fusion
