// PNG (and APNG) headers: the chunk layout walked by hand (truncation, IEND, acTL, eXIf), IHDR read
// and checked by libpng (png_read_info stops at the first IDAT: nothing is inflated).
#include <png.h>

#include <algorithm>
#include <csetjmp>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "image/header_formats.h"
#include "base/status_macros.h"

namespace fusion::image::internal {
namespace {

struct PngSource {
  absl::string_view bytes;
  size_t pos = 0;
  absl::string_view what;
  std::string error;  // libpng's error text, for the log
};

void ReadFn(png_structp png, png_bytep out, png_size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (src->bytes.size() - src->pos < n) png_error(png, "read past the end of the data");
  std::memcpy(out, src->bytes.data() + src->pos, n);
  src->pos += n;
}

void ErrorFn(png_structp png, png_const_charp message) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  src->error = message;
  png_longjmp(png, 1);
}

void WarningFn(png_structp png, png_const_charp message) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  LogLibraryMessage(src->what, "libpng warning", message);
}

// Walks the chunks: IHDR first, at least one IDAT, every chunk whole, IEND present.
absl::Status WalkChunks(absl::string_view bytes, absl::string_view what, ImageHeader& out) {
  const unsigned char* p = U8(bytes);
  size_t pos = 8;
  bool first = true, idat = false;
  while (bytes.size() - pos >= 8) {
    const uint32_t length = Be32(p + pos);
    const std::string type(bytes.substr(pos + 4, 4));
    if (length > 0x7fffffffu) return Corrupt(what, "PNG", absl::StrCat("chunk ", type, " length ", length));
    if (first && type != "IHDR") return Corrupt(what, "PNG", "the first chunk is not IHDR");
    first = false;
    if (bytes.size() - pos - 8 < uint64_t{length} + 4) {
      return Truncated(what, absl::StrCat("the PNG ends inside its ", type, " chunk"), bytes.size());
    }
    if (type == "acTL" && length >= 8) out.frames = std::max<uint32_t>(1, Be32(p + pos + 8));
    if (type == "eXIf") out.orientation = TiffOrientation(bytes.substr(pos + 8, length));
    if (type == "IDAT") idat = true;
    if (type == "IEND") {
      if (!idat) return Corrupt(what, "PNG", "no IDAT chunk");
      return absl::OkStatus();
    }
    pos += 12 + uint64_t{length};
  }
  return Truncated(what, "the PNG ends before its IEND chunk", bytes.size());
}

}  // namespace

absl::Status ReadPng(absl::string_view bytes, absl::string_view what, ImageHeader& out) {
  RETURN_IF_ERROR(WalkChunks(bytes, what, out));
  PngSource src{bytes, 0, what, {}};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, ErrorFn, WarningFn);
  if (png == nullptr) return absl::ResourceExhaustedError(absl::StrCat(what, ": no memory for a PNG reader"));
  png_infop info = png_create_info_struct(png);
  png_uint_32 width = 0, height = 0;
  int depth = 0, colour = 0;
  volatile bool trns = false;  // set after setjmp, read after it
  if (info != nullptr && setjmp(png_jmpbuf(png)) == 0) {
    // Our own pixel limit applies, with our message; libpng's default 1e6 per side does not.
    png_set_user_limits(png, PNG_UINT_31_MAX, PNG_UINT_31_MAX);
    png_set_read_fn(png, &src, ReadFn);
    png_read_info(png, info);
    png_get_IHDR(png, info, &width, &height, &depth, &colour, nullptr, nullptr, nullptr);
    trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
  } else if (src.error.empty()) {
    src.error = "no memory for the PNG info";
  }
  png_destroy_read_struct(&png, info != nullptr ? &info : nullptr, nullptr);
  if (!src.error.empty()) {
    LogLibraryMessage(what, "libpng error", src.error);
    return Corrupt(what, "PNG", "IHDR or an ancillary chunk before IDAT is invalid");
  }
  out.width = width;
  out.height = height;
  out.bit_depth = static_cast<uint32_t>(depth);
  out.alpha = (colour & PNG_COLOR_MASK_ALPHA) != 0 || trns;
  out.channels = ((colour & PNG_COLOR_MASK_COLOR) != 0 ? 3 : 1) + (out.alpha ? 1 : 0);
  // OpenCV applies an eXIf orientation except to images decoded with their alpha channel
  // (IMREAD_UNCHANGED, pipeline/image_io.h): the sides as the daemon decodes them.
  if (out.alpha) out.orientation = 1;
  if (out.orientation >= 5) std::swap(out.width, out.height);
  return absl::OkStatus();
}

}  // namespace fusion::image::internal
