// The checks a job's fusion.v1.JobOptions and images pass at SubmitJob, before anything is
// journaled, queued or decoded (PipelineRunner::Plan calls ValidateJobOptions). No
// LibTorch, no OpenCV: the fuzz build (tests/fuzz) links them.
// ValidateJobOptions: INVALID_ARGUMENT naming the option ("options: ratio 2 is not in [0,1]"):
//   ratio in [0,1]; enhance_scale and upscale 0, 2 or 4; enhance_model a catalogue model of
//   stage "enhance"; faces REFERENCE with an inline reference image; reference_max_distance
//   >= 0; max_side 0 or [64,16384]; min_face_px 0 or [8,100000]; min_face_score 0 or (0,1);
//   a known output format; start_seconds, duration_seconds in [0,1e7); video_crf 0..51;
//   video_preset empty or an x264 preset; video_detect a VideoDetect value (0 = TRACK);
//   keyframe_interval 0..300.
// ScreenJobImages: source, target and (faces REFERENCE) the reference through
//   image::ScreenImage at max_pixels (INVALID_ARGUMENT naming the image).
// Thread-safety: pure functions (the catalogue is read only).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "fusion/v1/fusion.pb.h"
#include "models/catalogue/catalogue.h"

namespace fusion {

absl::Status ValidateJobOptions(const v1::JobOptions& o, const models::ModelCatalogue& catalogue);

absl::Status ScreenJobImages(const v1::JobOptions& o, const std::string& source_image,
                             const std::string& target_image, uint64_t max_pixels);

}  // namespace fusion
