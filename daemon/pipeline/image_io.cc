// Image decoding and encoding of a job (image_io.h).
#include "pipeline/image_io.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <png.h>
#include <zlib.h>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "image/image_header.h"
#include "image/jpeg_decode.h"
#include "spdlog/spdlog.h"
#include "base/status_macros.h"

namespace fusion {
namespace {

cv::Mat To8Bit(const cv::Mat& m) {
  if (m.depth() == CV_8U) return m;
  cv::Mat out;
  m.convertTo(out, CV_8U, m.depth() == CV_16U ? 1.0 / 257.0 : 255.0);
  return out;
}

cv::Mat ToBgr(const cv::Mat& m8) {
  cv::Mat bgr;
  switch (m8.channels()) {
    case 1: cv::cvtColor(m8, bgr, cv::COLOR_GRAY2BGR); break;
    case 4: cv::cvtColor(m8, bgr, cv::COLOR_BGRA2BGR); break;
    default: bgr = m8;
  }
  return bgr;
}

// `result` (8-bit, target's channels without alpha) at the target's depth, keeping unchanged
// pixels of `original` exactly.
cv::Mat ComposeColour(const cv::Mat& original_colour, const cv::Mat& result8, const cv::Mat& changed) {
  if (original_colour.depth() == CV_8U) return result8;
  cv::Mat scaled, out = original_colour.clone();
  result8.convertTo(scaled, original_colour.depth(), 257.0);
  scaled.copyTo(out, changed);
  return out;
}

constexpr uint64_t kMiB = uint64_t{1} << 20;

// `png` without its iCCP chunks (each chunk: 4-byte length, type, data, CRC), or "" when it has
// none. OpenCV's PNG decoder ignores colour profiles but lets libpng print "libpng warning:
// iCCP: known incorrect sRGB profile" straight to stderr (its warning handler cannot be set):
// without the chunk the pixels are the same and nothing bypasses the daemon's log. The
// structure was checked by ScreenImage (every chunk whole).
std::string WithoutIccp(const std::string& png) {
  auto be32 = [&](size_t at) {
    return (uint32_t{static_cast<uint8_t>(png[at])} << 24) | (uint32_t{static_cast<uint8_t>(png[at + 1])} << 16) |
           (uint32_t{static_cast<uint8_t>(png[at + 2])} << 8) | uint32_t{static_cast<uint8_t>(png[at + 3])};
  };
  std::vector<std::pair<size_t, size_t>> drop;  // [begin, end) of each iCCP chunk
  for (size_t at = 8; at + 12 <= png.size();) {
    const size_t end = at + 12 + be32(at);
    if (end > png.size()) break;
    if (png.compare(at + 4, 4, "iCCP") == 0) drop.emplace_back(at, end);
    if (png.compare(at + 4, 4, "IDAT") == 0) break;  // iCCP must come before the image data
    at = end;
  }
  if (drop.empty()) return "";
  std::string out;
  out.reserve(png.size());
  size_t from = 0;
  for (const auto& [begin, end] : drop) {
    out.append(png, from, begin - from);
    from = end;
  }
  out.append(png, from, std::string::npos);
  spdlog::debug("PNG: its iCCP colour profile is ignored (OpenCV does not apply it)");
  return out;
}

// Raw pixel bytes plus zlib's deflateBound-style overhead (a stored block per 16 KiB) and a
// filter byte per row: what a PNG (or a JPEG, far below it) of the image can occupy at most.
uint64_t CompressedBound(uint64_t pixels, uint64_t rows, uint64_t elem) {
  const uint64_t raw = pixels * elem + rows;
  return raw + raw / 4096 + raw / 16384 + 64 * 1024;
}

// libpng's write callbacks: append to the std::string; no flushing.
void AppendPng(png_structp png, png_bytep data, png_size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), n);
}
void FlushPng(png_structp) {}
void PngError(png_structp png, png_const_charp message) {
  spdlog::error("encoding the PNG result: libpng: {}", message);
  png_longjmp(png, 1);
}
void PngWarning(png_structp, png_const_charp message) { spdlog::debug("encoding the PNG result: libpng: {}", message); }

// `m` (CV_8U or CV_16U; 1 channel grey, 3 BGR, 4 BGRA) as a PNG into *out: every row with the
// Up filter (the row minus the row above) and zlib's fastest level with its RLE strategy.
// cv::imencode's default (Sub filter, same zlib settings) took 58 ms and 2.07 MB for the
// 1920x1280 group photo here, Up 43 ms and 1.49 MB (docs/PERFORMANCE.md, "PNG encode"); OpenCV
// 4.6 cannot choose the filter. Lossless either way. No chunk but IHDR, IDAT and IEND (as
// OpenCV). false when libpng failed (logged). Plain C data only between setjmp and longjmp.
bool WritePng(const cv::Mat& m, std::string* out) {
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, PngError, PngWarning);
  if (png == nullptr) return false;
  png_infop info = png_create_info_struct(png);
  if (info == nullptr || setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  const int type = m.channels() == 1 ? PNG_COLOR_TYPE_GRAY : m.channels() == 4 ? PNG_COLOR_TYPE_RGB_ALPHA
                                                                                : PNG_COLOR_TYPE_RGB;
  png_set_write_fn(png, out, AppendPng, FlushPng);
  png_set_IHDR(png, info, static_cast<png_uint_32>(m.cols), static_cast<png_uint_32>(m.rows),
               m.depth() == CV_16U ? 16 : 8, type, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_BASE,
               PNG_FILTER_TYPE_BASE);
  png_set_filter(png, PNG_FILTER_TYPE_BASE, PNG_FILTER_UP);
  png_set_compression_level(png, Z_BEST_SPEED);
  png_set_compression_strategy(png, Z_RLE);
  png_write_info(png, info);
  if (m.channels() >= 3) png_set_bgr(png);
  if (m.depth() == CV_16U) png_set_swap(png);  // PNG samples are big-endian
  for (int y = 0; y < m.rows; ++y) png_write_row(png, const_cast<png_bytep>(m.ptr<uchar>(y)));
  png_write_end(png, info);
  png_destroy_write_struct(&png, &info);
  return true;
}

}  // namespace

DecodeFootprint DecodeHostBytes(const image::ImageHeader& h, uint64_t encoded_bytes) {
  const uint64_t px = h.pixels();
  // Channels as decoded: grey -> 1; alpha, or 2 or 4 samples a TIFF/BMP may use for one -> 4
  // (BGRA); else 3. A JPEG gives 1 or 3 (CMYK converted).
  uint64_t channels = h.channels == 1 ? 1 : (h.alpha || h.channels == 2 || h.channels >= 4) ? 4 : 3;
  if (h.format == image::ImageFormat::kJpeg) channels = h.channels == 1 ? 1 : 3;
  const uint64_t depth = h.bit_depth > 16 ? 4 : h.bit_depth > 8 ? 2 : 1;  // bytes per sample
  const uint64_t original = px * channels * depth;
  DecodeFootprint f;
  // `bgr` shares `original` only for 8-bit 3-channel images.
  f.kept = original + (channels == 3 && depth == 1 ? 0 : px * 3);
  // Library state and rows; OpenCV's WebP decoder copies the file, a PNG loses its iCCP in a copy.
  f.scratch = kMiB + encoded_bytes;
  if (h.format == image::ImageFormat::kJpeg && h.progressive) f.scratch += px * h.channels * 2;
  if (h.orientation != 1) f.scratch += 2 * original;  // the oriented copy and a rotate's temporary
  if (depth == 4) f.scratch += original;              // float images converted to 16 bit
  if (depth != 1) f.scratch += px * channels;         // the 8-bit copy `bgr` is made from
  if (!h.alpha_known) f.scratch += original;          // a second decode may follow the first
  return f;
}

uint64_t EncodeHostBytes(const DecodedImage& target, v1::OutputFormat format) {
  const uint64_t px = target.bgr.total(), rows = static_cast<uint64_t>(target.bgr.rows);
  const uint64_t channels = static_cast<uint64_t>(target.original.channels());
  const uint64_t depth = target.original.elemSize1() == 0 ? 1 : target.original.elemSize1();
  uint64_t bytes = kMiB + px * 5;  // the BGR difference (3), the grey one and the mask (1 + 1)
  if (channels == 1) bytes += px * (1 + 2 * depth);      // the grey result, scaled and composed
  if (channels == 3 && depth != 1) bytes += px * 6 * depth;
  if (channels == 4) bytes += px * (11 + 6) * depth;     // planes, colour, composed, merged
  uint64_t out_channels = channels, out_depth = depth;
  if (format == v1::JPEG) {
    bytes += px * channels;  // the 8-bit copy, then BGR
    out_channels = std::min<uint64_t>(channels, 3);
    out_depth = 1;
  }
  return bytes + 2 * CompressedBound(px, rows, out_channels * out_depth);
}

uint64_t EncodedResultBound(const image::ImageHeader& h, uint64_t scale, v1::OutputFormat format) {
  // Channels and sample bytes as DecodeHostBytes counts them (the result keeps the target's).
  uint64_t channels = h.channels == 1 ? 1 : (h.alpha || h.channels == 2 || h.channels >= 4) ? 4 : 3;
  if (h.format == image::ImageFormat::kJpeg) channels = h.channels == 1 ? 1 : 3;
  uint64_t depth = h.bit_depth > 8 ? 2 : 1;  // float images are written 16-bit
  if (format == v1::JPEG) {
    channels = std::min<uint64_t>(channels, 3);
    depth = 1;
  }
  const uint64_t rows = uint64_t{h.height} * scale;
  return CompressedBound(uint64_t{h.width} * scale * rows, rows, channels * depth);
}

absl::StatusOr<DecodedImage> DecodeImage(const std::string& bytes, const std::string& what,
                                         uint64_t max_pixels) {
  // The header first (SubmitJob checked it too; a journaled job from an older daemon or a
  // changed limit meets it here): nothing is decoded past the limit, of an unknown format, or cut.
  ASSIGN_OR_RETURN(auto header, image::ScreenImage(bytes, what, max_pixels));
  const std::string stripped = header.format == image::ImageFormat::kPng ? WithoutIccp(bytes) : "";
  const std::string& data = stripped.empty() ? bytes : stripped;
  const cv::Mat buffer(1, static_cast<int>(data.size()), CV_8U, const_cast<char*>(data.data()));
  // Alpha images as they are (IMREAD_UNCHANGED); the rest with EXIF orientation applied. One
  // decode when the header knows about alpha; TIFF and BMP leave it to the decoder.
  const int keep = cv::IMREAD_UNCHANGED, oriented = cv::IMREAD_ANYDEPTH | cv::IMREAD_ANYCOLOR;
  DecodedImage img;
  try {
    if (header.format == image::ImageFormat::kJpeg) {  // damaged data is seen (jpeg_decode.h)
      ASSIGN_OR_RETURN(img.original, DecodeJpeg(bytes, what, header));
    } else {
      img.original = cv::imdecode(buffer, header.alpha_known && !header.alpha ? oriented : keep);
    }
    if (!header.alpha_known && !img.original.empty() && img.original.channels() != 4) {
      img.original.release();
      img.original = cv::imdecode(buffer, oriented);
    }
    if (img.original.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": the ", image::ToString(header.format),
                                                     " data cannot be decoded (", bytes.size(), " bytes)"));
    }
    if (static_cast<uint64_t>(img.original.total()) != header.pixels()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": decoded ", img.original.cols, "x", img.original.rows,
                                                     " pixels, its header says ", header.width, "x",
                                                     header.height));
    }
    if (img.original.depth() != CV_8U && img.original.depth() != CV_16U) {
      img.original.convertTo(img.original, CV_16U, 65535.0);  // float images: to 16 bit
    }
    img.bgr = ToBgr(To8Bit(img.original));
  } catch (const cv::Exception& e) {
    spdlog::warn("{}: OpenCV: {}", what, e.what());  // the library's text stays in the log
    return absl::InvalidArgumentError(absl::StrCat(what, ": the ", image::ToString(header.format),
                                                   " data cannot be decoded (", bytes.size(), " bytes)"));
  }
  return img;
}

absl::StatusOr<std::string> EncodeResult(const DecodedImage& target, const cv::Mat& result_bgr,
                                         v1::OutputFormat format) {
  const cv::Mat& orig = target.original;
  // The change mask matters only where the original's samples are kept apart from the 8-bit
  // result (16 bit): an 8-bit target's result is the result's bytes (ComposeColour).
  cv::Mat changed;
  if (orig.depth() != CV_8U) {
    cv::Mat diff;
    cv::absdiff(result_bgr, target.bgr, diff);
    cv::cvtColor(diff, changed, cv::COLOR_BGR2GRAY);
    changed = changed > 0;
  }
  cv::Mat out;
  if (orig.channels() == 1) {
    cv::Mat grey;
    cv::cvtColor(result_bgr, grey, cv::COLOR_BGR2GRAY);
    out = ComposeColour(orig, grey, changed);
  } else if (orig.channels() == 4) {
    std::vector<cv::Mat> planes;
    cv::split(orig, planes);
    cv::Mat colour;
    cv::merge(std::vector<cv::Mat>{planes[0], planes[1], planes[2]}, colour);
    cv::split(ComposeColour(colour, result_bgr, changed), planes.data());
    cv::merge(planes, out);  // alpha (planes[3]) as decoded
  } else {
    out = ComposeColour(orig, result_bgr, changed);
  }
  const bool jpeg = format == v1::JPEG;
  if (jpeg) {
    out = To8Bit(out);
    if (out.channels() == 4) cv::cvtColor(out, out, cv::COLOR_BGRA2BGR);
  }
  if (!jpeg) {
    // Written into one buffer of the bound (pages are touched as the encoder writes), then
    // copied to its size: at most the bound plus the result (EncodeHostBytes counts 2 bounds).
    std::string png;
    png.reserve(CompressedBound(out.total(), static_cast<uint64_t>(out.rows), out.elemSize()));
    if (!WritePng(out, &png)) return absl::InternalError("encoding the PNG result failed");
    png.shrink_to_fit();
    return png;
  }
  std::vector<uchar> encoded;
  try {
    if (!cv::imencode(".jpg", out, encoded)) return absl::InternalError("encoding the JPEG result failed");
  } catch (const cv::Exception& e) {
    spdlog::error("encoding the JPEG result: OpenCV: {}", e.what());
    return absl::InternalError("encoding the JPEG result failed");
  }
  return std::string(encoded.begin(), encoded.end());
}

}  // namespace fusion
