// The tracking checkpoint's conversions (video_checkpoint.h).
#include "pipeline/video_checkpoint.h"

namespace fusion {

void SavePoints(const faceapi::Landmarks68& points, google::protobuf::RepeatedField<float>* out) {
  out->Clear();
  out->Reserve(2 * static_cast<int>(points.size()));
  for (const faceapi::Point& p : points) {
    out->Add(p.x);
    out->Add(p.y);
  }
}

bool LoadPoints(const google::protobuf::RepeatedField<float>& in, faceapi::Landmarks68* points) {
  if (in.size() != 2 * static_cast<int>(points->size())) return false;
  for (size_t i = 0; i < points->size(); ++i) (*points)[i] = {in[2 * i], in[2 * i + 1]};
  return true;
}

void SaveFilter(uint64_t track, const geometry::OneEuroPoints& filter, internal::FilterState* out) {
  const geometry::OneEuroPoints::State s = filter.state();
  out->set_track(track);
  out->set_started(s.started);
  for (double v : {s.cx, s.cy, s.s, s.vx, s.vy, s.vs}) out->add_pose(v);
  SavePoints(s.shape, out->mutable_shape());
  out->set_speed(s.speed);
  out->set_shape_speed(s.shape_speed);
}

bool LoadFilter(const internal::FilterState& in, geometry::OneEuroPoints* filter) {
  geometry::OneEuroPoints::State s;
  if (in.pose_size() != 6 || !LoadPoints(in.shape(), &s.shape)) return false;
  s.started = in.started();
  s.cx = in.pose(0), s.cy = in.pose(1), s.s = in.pose(2);
  s.vx = in.pose(3), s.vy = in.pose(4), s.vs = in.pose(5);
  s.speed = in.speed();
  s.shape_speed = in.shape_speed();
  filter->Restore(s);
  return true;
}

}  // namespace fusion
