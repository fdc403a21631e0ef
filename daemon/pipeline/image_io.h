// Image decoding and encoding of a job (OpenCV only, no LibTorch).
//
// Decode: the header is screened first (image/image_header.h: format PNG, JPEG, WebP, TIFF or
// BMP, pixels <= max_pixels, not truncated) so nothing is decoded that would not be accepted;
// then OpenCV decodes once. EXIF orientation is applied (OpenCV does it for every mode
// except IMREAD_UNCHANGED, which is used only for images with an alpha channel: PNG/WebP carry
// no EXIF orientation in practice). The stages see `bgr`, 8-bit 3-channel BGR; `original` keeps
// the decoded depth (8 or 16 bit) and channels (1 grey, 3 BGR, 4 BGRA). A PNG's iCCP colour
// profile is dropped before decoding (OpenCV ignores it, and libpng would print "iCCP: known
// incorrect sRGB profile" to stderr): nothing a decoder says bypasses the daemon's log.
// Encode: the result keeps the target's resolution, channels and depth. Pixels the pipeline did
// not change keep their original values exactly (16-bit and alpha included); changed pixels are
// the 8-bit result scaled to the depth (x257 for 16 bit); grey targets give a grey result; alpha
// is kept. JPEG output is 8-bit without alpha (a JPEG cannot hold either). PNG is written with
// libpng (Up row filter, zlib level 1, RLE: image_io.cc WritePng), JPEG with cv::imencode.
// Errors: INVALID_ARGUMENT naming the image ("source image", "target image") for what
// ScreenImage refuses, undecodable data ("target image: the JPEG data cannot be decoded (N
// bytes)") or a decoded size other than the header's; INTERNAL when the encoder fails. No
// OpenCV text reaches the message (it is logged).
// Thread-safety: free functions.
#pragma once

#include <cstdint>
#include <string>

#include <opencv2/core/mat.hpp>

#include "absl/status/statusor.h"
#include "fusion/v1/fusion.pb.h"
#include "image/image_header.h"

namespace fusion {

struct DecodedImage {
  cv::Mat original;  // as decoded (orientation applied): CV_8U/CV_16U, 1, 3 or 4 channels
  cv::Mat bgr;       // CV_8UC3 BGR of the same size
};

absl::StatusOr<DecodedImage> DecodeImage(const std::string& bytes, const std::string& what,
                                         uint64_t max_pixels);

// `result_bgr` (CV_8UC3, the target's size) composed with `target` as described above.
absl::StatusOr<std::string> EncodeResult(const DecodedImage& target, const cv::Mat& result_bgr,
                                         v1::OutputFormat format);

// Host memory of decoding and encoding, from sizes known before anything is allocated
// (docs/ARCHITECTURE.md#invariants, 1: a job admits these on the host tier first). Bytes, upper
// bounds; the figures per format are measured by ImageIoMemory* in
// tests/pipeline/image_io_memory_test.cc.
struct DecodeFootprint {
  // `original` and `bgr` of the DecodedImage: held while the job uses the image.
  uint64_t kept = 0;
  // Freed when DecodeImage returns: the decoder's own buffers (libjpeg's whole-image DCT
  // coefficients for a progressive JPEG, 2 B per sample; a copy of the file: OpenCV's of a
  // WebP, a PNG's without its iCCP chunk), the
  // copies EXIF orientation and the 8-bit conversion make, and 1 MiB of row buffers and
  // library state.
  uint64_t scratch = 0;
};
// For an image whose header is `header` and whose file has `encoded_bytes` bytes.
DecodeFootprint DecodeHostBytes(const image::ImageHeader& header, uint64_t encoded_bytes);
// What EncodeResult(target, result, format) allocates, for a result of target's size: the
// change mask and the composed image (up to 17 B/px for 16-bit RGBA), and the encoded bytes
// counted twice at zlib's bound on the raw pixels (the encoder's buffer, whose doubling
// touches only what it writes, and the returned string: for PNG one buffer of the bound and
// its copy at the encoded size), plus 1 MiB of encoder state. Freed
// when it returns, except the returned string.
uint64_t EncodeHostBytes(const DecodedImage& target, v1::OutputFormat format);
// A bound on the encoded result's bytes for a target whose header is `header`, its sides times
// `scale` (upscale; 1 for none): the channels and sample size the result keeps (JPEG: at most
// 3 channels of 8 bits) at zlib's bound on the raw pixels, a filter byte per row and 64 KiB
// (CompressedBound: a PNG stored uncompressed at worst; a JPEG is far below it).
uint64_t EncodedResultBound(const image::ImageHeader& header, uint64_t scale, v1::OutputFormat format);

}  // namespace fusion
