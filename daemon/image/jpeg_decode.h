// JPEG decoding with libjpeg directly (not cv::imdecode), so that damaged data is seen: libjpeg
// reports a premature end or corrupt entropy-coded data only as warnings and fills the rest of
// the image with grey, which OpenCV's decoder prints to stderr and ignores (a JPEG with 2/3 of
// its rows grey would be swapped and returned SUCCEEDED).
// Policy: a JPEG whose data libjpeg had to patch is refused, INVALID_ARGUMENT:
//   "target image truncated: 412 of 1200 rows decoded (the JPEG data ends early)"
//   "target image corrupt: the JPEG data is damaged (detected after row 412 of 1200; the decoder
//   patched it 3 times)" (libjpeg notices damage where the scan data stops making sense, which
//   can be well after the damaged bytes: the row says where it noticed)
// (a swap onto a partly grey frame is not the image the client meant; the failure is
// deterministic: libjpeg's output and warnings depend on the bytes only). Progressive JPEGs
// are decoded whole before rows exist: their row is reported as 0.
// Output as OpenCV's decoder gives it: grey -> CV_8UC1; YCbCr/RGB -> CV_8UC3 BGR; CMYK/YCCK
// (Adobe inverted, as written by Photoshop) -> CV_8UC3 BGR; EXIF orientation applied.
// Memory: the decoded Mat plus one row (and one transposed copy for orientations 5-8).
// Libjpeg's messages go to the daemon log at debug level, never to stderr.
// Thread-safety: free function.
#pragma once

#include <string>

#include <opencv2/core/mat.hpp>

#include "absl/status/statusor.h"
#include "image/image_header.h"

namespace fusion {

// `header` is ReadImageHeader's for `bytes` (format kJpeg).
absl::StatusOr<cv::Mat> DecodeJpeg(const std::string& bytes, const std::string& what,
                                   const image::ImageHeader& header);

}  // namespace fusion
