// Per-format header readers behind ReadImageHeader (image_header.h). Internal to fusion_image.
// Each reader gets the whole file and fills `out` or returns INVALID_ARGUMENT naming `what`.
// Thread-safety: free functions, no shared state.
#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "image/image_header.h"

namespace fusion::image::internal {

absl::Status ReadPng(absl::string_view bytes, absl::string_view what, ImageHeader& out);
absl::Status ReadJpeg(absl::string_view bytes, absl::string_view what, ImageHeader& out);
absl::Status ReadWebp(absl::string_view bytes, absl::string_view what, ImageHeader& out);
absl::Status ReadTiff(absl::string_view bytes, absl::string_view what, ImageHeader& out);
absl::Status ReadBmp(absl::string_view bytes, absl::string_view what, ImageHeader& out);

// EXIF orientation (1..8) from an APP1 payload starting "Exif\0\0"; 1 when absent or invalid.
uint32_t ExifOrientation(absl::string_view app1);
// The same from a bare TIFF-structured EXIF block (PNG's eXIf chunk).
uint32_t TiffOrientation(absl::string_view tiff);

// "<what>: corrupt <format> header (<detail>)" / "<what> truncated: <detail>, <n> bytes".
absl::Status Corrupt(absl::string_view what, const char* format, absl::string_view detail);
absl::Status Truncated(absl::string_view what, absl::string_view detail, size_t size);

// A library's diagnostic, routed to the daemon log (debug level) with the image it concerns.
void LogLibraryMessage(absl::string_view what, const char* library, absl::string_view text);

inline uint32_t Be16(const unsigned char* p) { return (uint32_t{p[0]} << 8) | p[1]; }
inline uint32_t Be32(const unsigned char* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
inline uint32_t Le16(const unsigned char* p) { return (uint32_t{p[1]} << 8) | p[0]; }
inline uint32_t Le32(const unsigned char* p) {
  return (uint32_t{p[3]} << 24) | (uint32_t{p[2]} << 16) | (uint32_t{p[1]} << 8) | p[0];
}
inline const unsigned char* U8(absl::string_view s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

}  // namespace fusion::image::internal
