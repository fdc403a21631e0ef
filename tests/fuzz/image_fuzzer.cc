// Fuzz target: the image header check (image::ScreenImage: format, size, truncation, pixel
// limit) and the decode guard behind it (DecodeImage: screen, then OpenCV / libjpeg decode,
// then the decoded size and type checked against the header). docs/FUZZING.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include <opencv2/core.hpp>

#include "fuzz_check.h"
#include "image/image_header.h"
#include "pipeline/image_io.h"

namespace {
// Lower than fusiond's default (1e8) so that an accepted header decodes in milliseconds; the
// checks are the same at any limit.
constexpr uint64_t kMaxPixels = 1u << 20;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto header = fusion::image::ReadImageHeader(bytes, "fuzz image");
  if (!header.ok()) {
    FUZZ_CHECK(header.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  FUZZ_CHECK(header->width > 0 && header->height > 0);
  FUZZ_CHECK(header->channels >= 1 && header->channels <= 4);
  FUZZ_CHECK(header->frames >= 1);
  FUZZ_CHECK(header->orientation >= 1 && header->orientation <= 8);
  if (header->pixels() > kMaxPixels) {
    FUZZ_CHECK(!fusion::image::ScreenImage(bytes, "fuzz image", kMaxPixels).ok());
    return 0;
  }
  auto decoded = fusion::DecodeImage(bytes, "fuzz image", kMaxPixels);
  if (!decoded.ok()) {
    FUZZ_CHECK(decoded.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  // What the pipeline relies on after a successful decode.
  FUZZ_CHECK(static_cast<uint32_t>(decoded->original.cols) == header->width);
  FUZZ_CHECK(static_cast<uint32_t>(decoded->original.rows) == header->height);
  FUZZ_CHECK(decoded->bgr.type() == CV_8UC3);
  FUZZ_CHECK(decoded->bgr.size() == decoded->original.size());
  return 0;
}
