// WebP headers: the RIFF size against the data (truncation), the features from libwebp
// (WebPGetFeatures reads the VP8/VP8L/VP8X headers only).
#include <webp/decode.h>

#include "absl/strings/str_cat.h"
#include "image/header_formats.h"

namespace fusion::image::internal {

absl::Status ReadWebp(absl::string_view bytes, absl::string_view what, ImageHeader& out) {
  if (bytes.size() < 20) return Truncated(what, "the WebP ends inside its RIFF header", bytes.size());
  const uint64_t riff = uint64_t{Le32(U8(bytes) + 4)} + 8;
  if (riff < 20 || riff % 2 != 0) return Corrupt(what, "WebP", absl::StrCat("RIFF size ", riff - 8));
  if (bytes.size() < riff) {
    return Truncated(what, absl::StrCat("the WebP ends before the ", riff, " bytes its RIFF header declares"),
                     bytes.size());
  }
  WebPBitstreamFeatures features;
  const VP8StatusCode status = WebPGetFeatures(U8(bytes), bytes.size(), &features);
  if (status == VP8_STATUS_NOT_ENOUGH_DATA) {
    return Truncated(what, "the WebP ends inside its image header", bytes.size());
  }
  if (status != VP8_STATUS_OK) {
    LogLibraryMessage(what, "libwebp", absl::StrCat("WebPGetFeatures status ", static_cast<int>(status)));
    return Corrupt(what, "WebP", "the VP8/VP8L/VP8X header is invalid");
  }
  if (features.has_animation) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": animated WebP is not supported (send one frame)"));
  }
  out.width = static_cast<uint32_t>(features.width);
  out.height = static_cast<uint32_t>(features.height);
  out.alpha = features.has_alpha != 0;
  out.channels = out.alpha ? 4 : 3;
  out.bit_depth = 8;
  return absl::OkStatus();
}

}  // namespace fusion::image::internal
