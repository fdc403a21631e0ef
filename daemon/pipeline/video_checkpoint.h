// Conversions between the face tracking's state and its checkpoint message
// (video_checkpoint.proto): the points of a face and a track's point filter. VideoFaces and the
// video job's FrameSwapper use them to save their state with each chunk and to restore it when
// a job resumes (video_faces.h). No LibTorch.
// Errors: the Load functions return false, and leave their output unchanged, when the message
// does not have the expected number of values (a state written by another build).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

#include "pipeline/video_checkpoint.pb.h"
#include "geometry/face_track.h"
#include "models/faceapi/types.h"

namespace fusion {

// 68 points as x0, y0, x1, y1, ... (136 values), bit for bit.
void SavePoints(const faceapi::Landmarks68& points, google::protobuf::RepeatedField<float>* out);
bool LoadPoints(const google::protobuf::RepeatedField<float>& in, faceapi::Landmarks68* points);

void SaveFilter(uint64_t track, const geometry::OneEuroPoints& filter, internal::FilterState* out);
bool LoadFilter(const internal::FilterState& in, geometry::OneEuroPoints* filter);

}  // namespace fusion
