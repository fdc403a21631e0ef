// JPEG headers: the marker segments and the scan data's markers walked by hand (truncation: no
// end-of-image marker), the frame header read by libjpeg (jpeg_read_header decodes no scan) and
// the EXIF orientation from APP1.
#include <cstdio>  // jpeglib.h needs FILE
#include <jpeglib.h>

#include <csetjmp>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "image/header_formats.h"
#include "base/status_macros.h"

namespace fusion::image::internal {
namespace {

struct JpegErrors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  absl::string_view what;
  std::string error;
};

void ErrorExit(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  char text[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, text);
  e->error = text;
  std::longjmp(e->jump, 1);
}

void OutputMessage(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrors*>(cinfo->err);
  char text[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, text);
  LogLibraryMessage(e->what, "libjpeg", text);
}

// Index of the marker at or after `pos` in entropy-coded data (0xFF followed by neither 0x00
// stuffing nor a restart marker), or npos.
size_t NextMarkerInScan(absl::string_view bytes, size_t pos) {
  const unsigned char* p = U8(bytes);
  while (pos < bytes.size()) {
    const void* ff = std::memchr(p + pos, 0xff, bytes.size() - pos);
    if (ff == nullptr) return absl::string_view::npos;
    pos = static_cast<const unsigned char*>(ff) - p;
    if (pos + 1 >= bytes.size()) return absl::string_view::npos;
    const unsigned char m = p[pos + 1];
    if (m == 0x00 || (m >= 0xd0 && m <= 0xd7) || m == 0xff) {
      pos += 1;
      continue;
    }
    return pos;
  }
  return absl::string_view::npos;
}

// From SOI to EOI: every segment whole, every scan followed by a marker, EOI present.
absl::Status WalkMarkers(absl::string_view bytes, absl::string_view what) {
  const unsigned char* p = U8(bytes);
  size_t pos = 2;
  bool frame = false;
  while (true) {
    while (pos < bytes.size() && p[pos] == 0xff && pos + 1 < bytes.size() && p[pos + 1] == 0xff) ++pos;
    if (bytes.size() - pos < 2) break;
    if (p[pos] != 0xff) return Corrupt(what, "JPEG", absl::StrCat("no marker at byte ", pos));
    const unsigned char m = p[pos + 1];
    if (m == 0xd9) {
      if (!frame) return Corrupt(what, "JPEG", "end of image before any frame");
      return absl::OkStatus();
    }
    if (m == 0x01 || (m >= 0xd0 && m <= 0xd7)) {
      pos += 2;
      continue;
    }
    if (bytes.size() - pos < 4) break;
    const size_t length = Be16(p + pos + 2);
    if (length < 2) return Corrupt(what, "JPEG", absl::StrCat("segment length ", length, " at byte ", pos));
    if (bytes.size() - pos - 2 < length) break;
    if ((m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc)) frame = true;
    pos += 2 + length;
    if (m == 0xda) {
      pos = NextMarkerInScan(bytes, pos);
      if (pos == absl::string_view::npos) break;
    }
  }
  return Truncated(what, "the JPEG ends before its end-of-image marker", bytes.size());
}

}  // namespace

uint32_t ExifOrientation(absl::string_view app1) {
  if (app1.size() < 14 || app1.substr(0, 6) != absl::string_view("Exif\0\0", 6)) return 1;
  return TiffOrientation(app1.substr(6));
}

uint32_t TiffOrientation(absl::string_view tiff) {
  if (tiff.size() < 8) return 1;
  const unsigned char* t = U8(tiff);
  const bool le = tiff[0] == 'I' && tiff[1] == 'I';
  if (!le && !(tiff[0] == 'M' && tiff[1] == 'M')) return 1;
  auto u16 = [&](size_t at) { return le ? Le16(t + at) : Be16(t + at); };
  auto u32 = [&](size_t at) { return le ? Le32(t + at) : Be32(t + at); };
  if (u16(2) != 42) return 1;
  const uint64_t ifd = u32(4);
  if (ifd + 2 > tiff.size()) return 1;
  const uint32_t entries = u16(ifd);
  for (uint32_t i = 0; i < entries; ++i) {
    const uint64_t e = ifd + 2 + uint64_t{i} * 12;
    if (e + 12 > tiff.size()) return 1;
    if (u16(e) == 0x0112 && u16(e + 2) == 3) {  // Orientation, SHORT
      const uint32_t v = u16(e + 8);
      return v >= 1 && v <= 8 ? v : 1;
    }
  }
  return 1;
}

absl::Status ReadJpeg(absl::string_view bytes, absl::string_view what, ImageHeader& out) {
  RETURN_IF_ERROR(WalkMarkers(bytes, what));
  jpeg_decompress_struct cinfo;
  JpegErrors errors;
  cinfo.err = jpeg_std_error(&errors.mgr);
  errors.mgr.error_exit = ErrorExit;
  errors.mgr.output_message = OutputMessage;
  errors.what = what;
  if (setjmp(errors.jump) == 0) {
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, U8(bytes), bytes.size());
    jpeg_save_markers(&cinfo, JPEG_APP0 + 1, 0xffff);
    jpeg_read_header(&cinfo, TRUE);
    out.width = cinfo.image_width;
    out.height = cinfo.image_height;
    out.channels = static_cast<uint32_t>(cinfo.num_components);
    out.bit_depth = static_cast<uint32_t>(cinfo.data_precision);
    // Grey, YCbCr/RGB or CMYK/YCCK (image_header.h): libjpeg reads frames of up to 10
    // components, which no decoder of ours handles as an image (found with image_fuzzer's
    // channel check, after its TIFF finding).
    if (out.channels != 1 && out.channels != 3 && out.channels != 4) {
      jpeg_destroy_decompress(&cinfo);
      return absl::InvalidArgumentError(absl::StrCat(what, ": unsupported JPEG layout (", out.channels,
                                                     " components); fusiond accepts 1, 3 or 4"));
    }
    out.progressive = cinfo.progressive_mode != 0;
    for (jpeg_saved_marker_ptr m = cinfo.marker_list; m != nullptr; m = m->next) {
      const uint32_t o = ExifOrientation(absl::string_view(reinterpret_cast<const char*>(m->data), m->data_length));
      if (o != 1) {
        out.orientation = o;
        break;
      }
    }
  }
  jpeg_destroy_decompress(&cinfo);
  if (!errors.error.empty()) {
    LogLibraryMessage(what, "libjpeg error", errors.error);
    return Corrupt(what, "JPEG", "the frame header or a table is invalid");
  }
  out.alpha = false;
  if (out.orientation >= 5) std::swap(out.width, out.height);  // transposed orientations
  return absl::OkStatus();
}

}  // namespace fusion::image::internal
