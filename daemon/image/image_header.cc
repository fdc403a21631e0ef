// Format sniffing, the pixel limit and the shared error helpers (image_header.h).
#include "image/image_header.h"

#include <cstring>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "image/header_formats.h"
#include "spdlog/spdlog.h"
#include "base/status_macros.h"

namespace fusion::image {
namespace internal {

absl::Status Corrupt(absl::string_view what, const char* format, absl::string_view detail) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": corrupt ", format, " header (", detail, ")"));
}

absl::Status Truncated(absl::string_view what, absl::string_view detail, size_t size) {
  return absl::InvalidArgumentError(absl::StrCat(what, " truncated: ", detail, ", ", size, " bytes"));
}

void LogLibraryMessage(absl::string_view what, const char* library, absl::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  spdlog::debug("{}: {}: {}", std::string(what), library, std::string(text));
}

}  // namespace internal

const char* ToString(ImageFormat format) {
  switch (format) {
    case ImageFormat::kPng: return "PNG";
    case ImageFormat::kJpeg: return "JPEG";
    case ImageFormat::kWebp: return "WebP";
    case ImageFormat::kTiff: return "TIFF";
    case ImageFormat::kBmp: return "BMP";
  }
  return "?";
}

namespace {

bool StartsWith(absl::string_view bytes, absl::string_view magic, size_t at = 0) {
  return bytes.size() >= at + magic.size() && bytes.substr(at, magic.size()) == magic;
}

std::string FirstBytes(absl::string_view bytes) {
  std::string out;
  for (size_t i = 0; i < bytes.size() && i < 8; ++i) {
    absl::StrAppendFormat(&out, "%s%02x", i == 0 ? "" : " ", static_cast<unsigned char>(bytes[i]));
  }
  return out;
}

}  // namespace

absl::StatusOr<ImageHeader> ReadImageHeader(absl::string_view bytes, absl::string_view what) {
  if (bytes.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty (0 bytes)"));
  ImageHeader h;
  absl::Status st;
  if (StartsWith(bytes, "\x89PNG\r\n\x1a\n")) {
    h.format = ImageFormat::kPng;
    st = internal::ReadPng(bytes, what, h);
  } else if (StartsWith(bytes, "\xff\xd8\xff")) {
    h.format = ImageFormat::kJpeg;
    st = internal::ReadJpeg(bytes, what, h);
  } else if (StartsWith(bytes, "RIFF") && StartsWith(bytes, "WEBP", 8)) {
    h.format = ImageFormat::kWebp;
    st = internal::ReadWebp(bytes, what, h);
  } else if (StartsWith(bytes, absl::string_view("II*\0", 4)) || StartsWith(bytes, absl::string_view("MM\0*", 4))) {
    h.format = ImageFormat::kTiff;
    st = internal::ReadTiff(bytes, what, h);
  } else if (StartsWith(bytes, "BM")) {
    h.format = ImageFormat::kBmp;
    st = internal::ReadBmp(bytes, what, h);
  } else {
    absl::Status unknown = absl::InvalidArgumentError(
        absl::StrCat(what, ": unknown image format (", bytes.size(), " bytes, first bytes ",
                     FirstBytes(bytes), "); fusiond accepts PNG, JPEG, WebP, TIFF and BMP"));
    unknown.SetPayload(kUnknownFormatPayload, absl::Cord("1"));
    return unknown;
  }
  if (!st.ok()) return st;
  if (h.width == 0 || h.height == 0) {
    return internal::Corrupt(what, ToString(h.format), absl::StrCat("size ", h.width, "x", h.height));
  }
  return h;
}

absl::Status CheckPixelLimit(const ImageHeader& header, absl::string_view what, uint64_t max_pixels) {
  if (header.pixels() <= max_pixels) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", header.width, "x", header.height, " pixels (",
                                                 header.pixels(), ") exceed the limit of ", max_pixels,
                                                 " pixels (max_pixels)"));
}

absl::StatusOr<ImageHeader> ScreenImage(absl::string_view bytes, absl::string_view what,
                                        uint64_t max_pixels) {
  ASSIGN_OR_RETURN(auto header, ReadImageHeader(bytes, what));
  RETURN_IF_ERROR(CheckPixelLimit(header, what, max_pixels));
  return header;
}

}  // namespace fusion::image
