#include "pipeline/target_kind.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "image/image_header.h"

namespace fusion {

video::FrameRange RangeOf(const v1::JobOptions& o) {
  return {.start_s = o.start_seconds(), .duration_s = o.duration_seconds()};
}

absl::StatusOr<TargetKind> ClassifyTarget(const std::string& bytes, const v1::JobOptions& options,
                                          uint64_t max_pixels, video::VideoInfo* info) {
  auto header = image::ScreenImage(bytes, "target image", max_pixels);
  if (header.ok()) return TargetKind::kImage;
  if (!absl::StrContains(header.status().message(), "unknown image format")) return header.status();
  auto probe = video::ProbeVideo(bytes, "target video", max_pixels, RangeOf(options));
  if (probe.ok()) {
    if (info != nullptr) *info = *std::move(probe);
    return TargetKind::kVideo;
  }
  if (video::LooksLikeVideoContainer(bytes)) return probe.status();
  std::string first;
  for (size_t i = 0; i < std::min<size_t>(bytes.size(), 4); ++i) {
    absl::StrAppendFormat(&first, "%s%02x", i == 0 ? "" : " ", static_cast<unsigned char>(bytes[i]));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "target: neither an image (PNG, JPEG, WebP, TIFF, BMP) nor a video (MP4, MOV, MKV, WebM, AVI) fusiond "
      "reads (", bytes.size(), " bytes, first bytes ", first, ")"));
}

}  // namespace fusion
