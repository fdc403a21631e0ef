// JPEG decoding with libjpeg and the damaged-data policy (jpeg_decode.h).
#include "image/jpeg_decode.h"

#include <cstdio>  // jpeglib.h needs FILE
#include <jpeglib.h>
#include <jerror.h>

#include <csetjmp>
#include <string>

#include <opencv2/core.hpp>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace fusion {
namespace {

struct Errors {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  const std::string* what;
  std::string error;
  int warnings = 0;
  bool eof = false;                  // JWRN_JPEG_EOF: the data ended early
  JDIMENSION first_bad_row = 0;      // output_scanline at the first warning
};

void Format(j_common_ptr cinfo, std::string& out) {
  char text[JMSG_LENGTH_MAX];
  (*cinfo->err->format_message)(cinfo, text);
  out = text;
}

void ErrorExit(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<Errors*>(cinfo->err);
  Format(cinfo, e->error);
  std::longjmp(e->jump, 1);
}

// The warnings libjpeg words "Corrupt JPEG data" or "Premature end": it patched over the scan
// data (grey or shifted pixels) or found data it could not place. Header-only ones (an unknown
// JFIF revision or Adobe transform, a bad ICC marker) leave every pixel as coded: logged only.
bool Damaging(int code) {
  switch (code) {
    case JWRN_JPEG_EOF: case JWRN_HIT_MARKER: case JWRN_HUFF_BAD_CODE: case JWRN_ARITH_BAD_CODE:
    case JWRN_MUST_RESYNC: case JWRN_NOT_SEQUENTIAL: case JWRN_BOGUS_PROGRESSION:
    case JWRN_EXTRANEOUS_DATA:
      return true;
    default:
      return false;
  }
}

// level -1: a warning (corrupt data patched over); >= 0: trace messages, ignored.
void EmitMessage(j_common_ptr cinfo, int level) {
  if (level >= 0) return;
  auto* e = reinterpret_cast<Errors*>(cinfo->err);
  std::string text;
  Format(cinfo, text);
  spdlog::debug("{}: libjpeg warning: {}", *e->what, text);
  if (!Damaging(cinfo->err->msg_code)) return;
  if (e->warnings++ == 0) {
    e->first_bad_row = cinfo->is_decompressor ? reinterpret_cast<j_decompress_ptr>(cinfo)->output_scanline : 0;
  }
  if (cinfo->err->msg_code == JWRN_JPEG_EOF) e->eof = true;
}

// Adobe-inverted CMYK to BGR, as OpenCV's decoder does it: each channel is (stored C/M/Y) * K.
void CmykRowToBgr(const unsigned char* cmyk, unsigned char* bgr, int width) {
  for (int x = 0; x < width; ++x, cmyk += 4, bgr += 3) {
    const int k = cmyk[3];
    bgr[2] = static_cast<unsigned char>(k - (((255 - cmyk[0]) * k) >> 8));
    bgr[1] = static_cast<unsigned char>(k - (((255 - cmyk[1]) * k) >> 8));
    bgr[0] = static_cast<unsigned char>(k - (((255 - cmyk[2]) * k) >> 8));
  }
}

cv::Mat Oriented(cv::Mat m, uint32_t orientation) {
  cv::Mat out;
  switch (orientation) {
    case 2: cv::flip(m, out, 1); return out;
    case 3: cv::rotate(m, out, cv::ROTATE_180); return out;
    case 4: cv::flip(m, out, 0); return out;
    case 5: cv::transpose(m, out); return out;
    case 6: cv::rotate(m, out, cv::ROTATE_90_CLOCKWISE); return out;
    case 7: cv::transpose(m, out); cv::rotate(out, out, cv::ROTATE_180); return out;
    case 8: cv::rotate(m, out, cv::ROTATE_90_COUNTERCLOCKWISE); return out;
    default: return m;
  }
}

// Decodes into `out` (allocated once the output size is known). False on a libjpeg error.
bool Decompress(const std::string& bytes, Errors& errors, cv::Mat& out) {
  jpeg_decompress_struct cinfo;
  cinfo.err = jpeg_std_error(&errors.mgr);
  errors.mgr.error_exit = ErrorExit;
  errors.mgr.emit_message = EmitMessage;
  std::vector<unsigned char> cmyk_row;
  if (setjmp(errors.jump) == 0) {
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
    jpeg_read_header(&cinfo, TRUE);
    const bool cmyk = cinfo.num_components == 4;
    cinfo.out_color_space = cinfo.num_components == 1 ? JCS_GRAYSCALE : cmyk ? JCS_CMYK : JCS_EXT_BGR;
    jpeg_start_decompress(&cinfo);
    out.create(static_cast<int>(cinfo.output_height), static_cast<int>(cinfo.output_width),
               cinfo.num_components == 1 ? CV_8UC1 : CV_8UC3);
    if (cmyk) cmyk_row.resize(size_t{cinfo.output_width} * 4);
    while (cinfo.output_scanline < cinfo.output_height) {
      unsigned char* row = out.ptr<unsigned char>(static_cast<int>(cinfo.output_scanline));
      JSAMPROW rows[1] = {cmyk ? cmyk_row.data() : row};
      if (jpeg_read_scanlines(&cinfo, rows, 1) != 1) break;
      if (cmyk) CmykRowToBgr(cmyk_row.data(), row, out.cols);
    }
    jpeg_finish_decompress(&cinfo);
  }
  jpeg_destroy_decompress(&cinfo);
  return errors.error.empty();
}

}  // namespace

absl::StatusOr<cv::Mat> DecodeJpeg(const std::string& bytes, const std::string& what,
                                   const image::ImageHeader& header) {
  Errors errors;
  errors.what = &what;
  cv::Mat out;
  if (!Decompress(bytes, errors, out)) {
    spdlog::debug("{}: libjpeg error: {}", what, errors.error);
    return absl::InvalidArgumentError(absl::StrCat(what, ": the JPEG data cannot be decoded (", bytes.size(), " bytes)"));
  }
  if (errors.warnings > 0) {
    if (errors.eof) {
      return absl::InvalidArgumentError(absl::StrCat(what, " truncated: ", errors.first_bad_row, " of ", out.rows,
                                                     " rows decoded (the JPEG data ends early)"));
    }
    return absl::InvalidArgumentError(absl::StrCat(what, " corrupt: the JPEG data is damaged (detected after row ",
                                                   errors.first_bad_row, " of ", out.rows, "; the decoder patched it ",
                                                   errors.warnings, errors.warnings == 1 ? " time)" : " times)"));
  }
  return Oriented(std::move(out), header.orientation);
}

}  // namespace fusion
