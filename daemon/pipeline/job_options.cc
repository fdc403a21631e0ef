// SubmitJob's checks of JobOptions and images (job_options.h).
#include "pipeline/job_options.h"

#include <algorithm>
#include <iterator>

#include <utility>

#include "absl/strings/str_cat.h"
#include "image/image_header.h"
#include "base/status_macros.h"

namespace fusion {

absl::Status ValidateJobOptions(const v1::JobOptions& o, const models::ModelCatalogue& catalogue) {
  if (!(o.ratio() >= 0 && o.ratio() <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("options: ratio ", o.ratio(), " is not in [0,1]"));
  }
  for (auto [what, v] : {std::pair{"enhance_scale", o.enhance_scale()}, std::pair{"upscale", o.upscale()}}) {
    if (v != 0 && v != 2 && v != 4) {
      return absl::InvalidArgumentError(absl::StrCat("options: ", what, " ", v, " is not 0, 2 or 4"));
    }
  }
  if (!o.enhance_model().empty()) {
    auto spec = catalogue.Get(o.enhance_model());
    if (!spec.ok()) return absl::InvalidArgumentError(absl::StrCat("options: enhance_model: ", spec.status().message()));
    if ((*spec)->stage != "enhance") {
      return absl::InvalidArgumentError(absl::StrCat("options: enhance_model '", o.enhance_model(),
                                                     "' is a ", (*spec)->stage, " model"));
    }
  }
  if (o.faces() == v1::REFERENCE && o.reference().inline_bytes().empty()) {
    return absl::InvalidArgumentError("options: faces REFERENCE needs a reference image");
  }
  if (o.reference_max_distance() < 0) return absl::InvalidArgumentError("options: reference_max_distance < 0");
  // max_side: any value; DetectSettingsFor clamps the pass cap to 416..1024 (README: a user's
  // --max-side 63 was refused although the README said clamped).
  if (o.min_face_px() != 0 && (o.min_face_px() < 8 || o.min_face_px() > 100000)) {
    return absl::InvalidArgumentError(absl::StrCat("options: min_face_px ", o.min_face_px(), " is not in [8,100000]"));
  }
  if (o.min_face_score() != 0 && !(o.min_face_score() > 0 && o.min_face_score() < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("options: min_face_score ", o.min_face_score(), " is not in (0,1)"));
  }
  if (!v1::OutputFormat_IsValid(o.format())) return absl::InvalidArgumentError("options: unknown format");
  if (!(o.start_seconds() >= 0 && o.start_seconds() < 1e7)) {
    return absl::InvalidArgumentError(absl::StrCat("options: start_seconds ", o.start_seconds(), " is not in [0,1e7)"));
  }
  if (!(o.duration_seconds() >= 0 && o.duration_seconds() < 1e7)) {
    return absl::InvalidArgumentError(
        absl::StrCat("options: duration_seconds ", o.duration_seconds(), " is not in [0,1e7)"));
  }
  if (o.video_crf() > 51) {
    return absl::InvalidArgumentError(absl::StrCat("options: video_crf ", o.video_crf(), " is not in [1,51] (0 = 18)"));
  }
  static constexpr const char* kPresets[] = {"ultrafast", "superfast", "veryfast", "faster", "fast",
                                             "medium",    "slow",      "slower",   "veryslow"};
  if (!o.video_preset().empty() &&
      std::find(std::begin(kPresets), std::end(kPresets), o.video_preset()) == std::end(kPresets)) {
    return absl::InvalidArgumentError(absl::StrCat("options: video_preset '", o.video_preset(),
                                                   "' is not an x264 preset (ultrafast .. veryslow)"));
  }
  // proto3 keeps an enum number it does not know: refuse it rather than read it as TRACK.
  if (!v1::VideoDetect_IsValid(o.video_detect())) {
    return absl::InvalidArgumentError(absl::StrCat("options: video_detect ", static_cast<int>(o.video_detect()),
                                                   " is not a VideoDetect (TRACK 1, EVERY_FRAME 2; 0 = TRACK)"));
  }
  if (o.keyframe_interval() > 300) {
    return absl::InvalidArgumentError(
        absl::StrCat("options: keyframe_interval ", o.keyframe_interval(), " is not in [1,300] (0 = 15)"));
  }
  return absl::OkStatus();
}

absl::Status ScreenJobImages(const v1::JobOptions& o, const std::string& source_image,
                             const std::string& target_image, uint64_t max_pixels) {
  for (const auto& [bytes, what] : {std::pair{&source_image, "source image"}, std::pair{&target_image, "target image"}}) {
    RETURN_IF_ERROR(image::ScreenImage(*bytes, what, max_pixels).status());
  }
  if (o.faces() == v1::REFERENCE) {
    RETURN_IF_ERROR(image::ScreenImage(o.reference().inline_bytes(), "reference image", max_pixels).status());
  }
  return absl::OkStatus();
}

}  // namespace fusion
