// BMP headers (no library: the file and DIB headers are fixed little-endian structs, as in
// OpenCV's own decoder): size, bits per pixel, and for uncompressed data its extent.
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "image/header_formats.h"

namespace fusion::image::internal {

absl::Status ReadBmp(absl::string_view bytes, absl::string_view what, ImageHeader& out) {
  const unsigned char* p = U8(bytes);
  if (bytes.size() < 26) return Truncated(what, "the BMP ends inside its headers", bytes.size());
  const uint64_t data_offset = Le32(p + 10);
  const uint32_t dib = Le32(p + 14);
  int64_t width = 0, height = 0;
  uint32_t bpp = 0, compression = 0;
  if (dib == 12) {  // OS/2 BITMAPCOREHEADER
    width = Le16(p + 18);
    height = Le16(p + 20);
    bpp = Le16(p + 24);
  } else if (dib >= 40 && dib <= 124) {
    if (bytes.size() < 14 + 40) return Truncated(what, "the BMP ends inside its headers", bytes.size());
    width = static_cast<int32_t>(Le32(p + 18));
    height = static_cast<int32_t>(Le32(p + 22));
    bpp = Le16(p + 28);
    compression = Le32(p + 30);
  } else {
    return Corrupt(what, "BMP", absl::StrCat("DIB header size ", dib));
  }
  if (width <= 0 || height == 0 || height == INT32_MIN) {
    return Corrupt(what, "BMP", absl::StrCat("size ", width, "x", height));
  }
  if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32) {
    return Corrupt(what, "BMP", absl::StrCat(bpp, " bits per pixel"));
  }
  const uint64_t rows = static_cast<uint64_t>(std::llabs(height));
  if (compression == 0 || compression == 3) {  // BI_RGB, BI_BITFIELDS: rows of fixed stride
    const uint64_t stride = (static_cast<uint64_t>(width) * bpp + 31) / 32 * 4;
    if (data_offset > bytes.size() || (bytes.size() - data_offset) / stride < rows) {
      return Truncated(what, absl::StrCat("the BMP ends before its ", rows, " rows of ", stride, " bytes"),
                       bytes.size());
    }
  }
  out.width = static_cast<uint32_t>(width);
  out.height = static_cast<uint32_t>(rows);
  out.channels = bpp == 32 ? 4 : 3;
  out.bit_depth = 8;
  out.alpha = false;
  out.alpha_known = false;  // 32-bit BMPs may or may not carry alpha; the decoder decides
  return absl::OkStatus();
}

}  // namespace fusion::image::internal
