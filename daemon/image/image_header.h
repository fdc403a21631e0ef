// Image headers read before anything is decoded (docs/ARCHITECTURE.md#invariants, 1 and 8: "an
// image is measured from its header before it is decoded"; "every size is bounded before
// allocation").
//
// ReadImageHeader() identifies the format from the leading bytes and reads the header with the
// format's own library (libpng, libjpeg, libwebp, libtiff; BMP's fixed header by hand). It
// inflates nothing and allocates no pixel memory: its cost is the header plus one pass over the
// container's structure (PNG chunk lengths, JPEG marker segments and the scan data's markers,
// RIFF size, TIFF strip extents), well under a millisecond per MB.
// Accepted formats: PNG (APNG: the default image; frames counted; eXIf orientation), JPEG (baseline, progressive,
// grey, YCbCr, CMYK/YCCK; EXIF orientation read and applied to width/height), WebP (still;
// lossy, lossless, alpha), TIFF (multi-page: the first page is the image, pages counted), BMP.
// Other formats OpenCV could decode (JPEG 2000, OpenEXR, HDR, PNM, PFM, Sun raster, ...) are
// refused: their decoders are never reached with a client's bytes.
// Errors (INVALID_ARGUMENT, the message starts with `what`, e.g. "target image", and never
// carries a library's text; that goes to the daemon log at debug level, formatted):
//   "<what>: empty"; "<what>: unknown image format (first bytes 68 65 6c 6c ...); fusiond accepts
//   PNG, JPEG, WebP, TIFF and BMP"; "<what>: corrupt PNG header (...)";
//   "<what> truncated: <how>, <N> bytes" (the container ends before its data does: a PNG
//   without IEND, a JPEG without its end-of-image marker, a WebP shorter than its RIFF size, a
//   TIFF or BMP whose pixel data lies past the end); "<what>: animated WebP is not supported";
//   "<what>: unsupported TIFF layout (5 samples per pixel of 8 bits); ..." (not 1-4 samples of
//   1-16 bits); "<what>: unsupported JPEG layout (5 components); ..." (not 1, 3 or 4).
// CheckPixelLimit(): "<what>: 20000x20000 pixels (400000000) exceed the limit of 100000000
// pixels (max_pixels)".
// Thread-safety: free functions; safe to call concurrently (no global library state is set).
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fusion::image {

enum class ImageFormat { kPng, kJpeg, kWebp, kTiff, kBmp };
const char* ToString(ImageFormat format);  // "PNG", "JPEG", ...

struct ImageHeader {
  ImageFormat format = ImageFormat::kPng;
  uint32_t width = 0;   // pixels, as decoded: EXIF orientation 5..8 swaps the stored sides
  uint32_t height = 0;  // pixels, as decoded
  uint32_t channels = 0;   // samples per pixel stored: 1 grey, 2 grey+alpha, 3, 4 (alpha/CMYK)
  uint32_t bit_depth = 0;  // bits per sample (1..16; BMP: bits per pixel / channels)
  bool alpha = false;      // an alpha channel (or PNG tRNS) is present
  // Whether `alpha` is known exactly (PNG, JPEG, WebP); TIFF and BMP leave it to the decoder.
  bool alpha_known = true;
  uint32_t frames = 1;      // APNG frames or TIFF pages; only the first is decoded
  uint32_t orientation = 1;  // EXIF orientation 1..8 (JPEG APP1, PNG eXIf without alpha); else 1
  // JPEG only: progressive (libjpeg then holds the whole image's DCT coefficients while decoding).
  bool progressive = false;

  uint64_t pixels() const { return uint64_t{width} * height; }
};

// Reads and checks the header and the container's structure as described above.
absl::StatusOr<ImageHeader> ReadImageHeader(absl::string_view bytes, absl::string_view what);

// INVALID_ARGUMENT when header.pixels() > max_pixels (message above).
absl::Status CheckPixelLimit(const ImageHeader& header, absl::string_view what, uint64_t max_pixels);

// The payload type on ReadImageHeader's INVALID_ARGUMENT when the bytes are no image format
// fusiond reads (neither PNG, JPEG, WebP, TIFF nor BMP): callers tell that apart from a damaged
// image of a known format by it (IsUnknownImageFormat), never by the message.
inline constexpr char kUnknownFormatPayload[] = "type.fusiond/unknown-image-format";
inline bool IsUnknownImageFormat(const absl::Status& st) {
  return absl::IsInvalidArgument(st) && st.GetPayload(kUnknownFormatPayload).has_value();
}

// ReadImageHeader + CheckPixelLimit: what the daemon runs on every image before it is queued
// (SubmitJob) and again before it is decoded (the job).
absl::StatusOr<ImageHeader> ScreenImage(absl::string_view bytes, absl::string_view what,
                                        uint64_t max_pixels);

}  // namespace fusion::image
