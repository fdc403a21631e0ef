// ClassifyTarget (target_kind.h).
#include "pipeline/target_kind.h"

#include "absl/strings/str_cat.h"

namespace fusion {

video::FrameRange RangeOf(const v1::JobOptions& o) {
  return {.start_s = o.start_seconds(), .duration_s = o.duration_seconds()};
}

absl::StatusOr<TargetClass> ClassifyTarget(const std::string& bytes, const v1::JobOptions& options,
                                           uint64_t max_pixels) {
  TargetClass out;
  auto header = image::ScreenImage(bytes, "target image", max_pixels);
  if (header.ok()) {
    out.image = *header;
    return out;
  }
  if (!image::IsUnknownImageFormat(header.status())) return header.status();
  auto probe = video::ProbeVideo(bytes, "target video", max_pixels, RangeOf(options));
  if (probe.ok()) {
    out.kind = TargetKind::kVideo;
    out.video = *std::move(probe);
    return out;
  }
  if (video::LooksLikeVideoContainer(bytes)) return probe.status();
  // Neither: the image screen's message (its contract, "target image: unknown image format
  // (...)"), and that it is no video either.
  return absl::InvalidArgumentError(absl::StrCat(
      header.status().message(), "; nor is it a video fusiond reads (MP4, MOV, MKV, WebM, AVI containers)"));
}

}  // namespace fusion
