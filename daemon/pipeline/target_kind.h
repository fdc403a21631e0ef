// ClassifyTarget: a job's kind from its target's content, never its file name: an image fusiond
// reads (image/image_header.h) makes an image job; bytes of no image format fusiond knows
// (image::IsUnknownImageFormat) but a video FFmpeg reads (video/video_probe.h) make a video job.
// Errors (INVALID_ARGUMENT): an image's own screening error ("target image: corrupt PNG
// header ..."; a recognised image format is never retried as a video); a container that does not
// probe ("target video truncated: ...", "target video: no video stream ...", "target video:
// 16384x16384 frames ... exceed the limit"); bytes that are neither: the image screen's
// "target image: unknown image format (31 bytes, first bytes 74 68 ...); fusiond accepts PNG,
// JPEG, WebP, TIFF and BMP; nor is it a video fusiond reads (MP4, MOV, MKV, WebM, AVI containers)".
// Thread-safety: a free function.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "fusion/v1/fusion.pb.h"
#include "image/image_header.h"
#include "video/video_probe.h"

namespace fusion {

enum class TargetKind { kImage, kVideo };

// What ClassifyTarget learnt: the kind, and the header of an image target or the probe of a
// video target (its frames counted in the job's range).
struct TargetClass {
  TargetKind kind = TargetKind::kImage;
  image::ImageHeader image;
  video::VideoInfo video;
};

absl::StatusOr<TargetClass> ClassifyTarget(const std::string& bytes, const v1::JobOptions& options,
                                           uint64_t max_pixels);

// The job's frame range from its options.
video::FrameRange RangeOf(const v1::JobOptions& options);

}  // namespace fusion
