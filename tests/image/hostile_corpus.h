// The hostile-input corpus, made from nothing but a face photo (no third-party files): PNG,
// JPEG and WebP bombs, truncated and corrupt files, text, random and empty bytes, odd shapes,
// depths and layouts. Each entry carries its documented outcome at SubmitJob and, when
// accepted, as a job (docs/HOSTILE-INPUTS.md). Test-only.
// Thread-safety: MakeHostileCorpus is a pure function of its argument.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <opencv2/core/mat.hpp>

#include "absl/status/status.h"

namespace fusion::testing {

struct HostileInput {
  std::string name;         // file-name-like id, e.g. "png_bomb_20000x20000"
  std::string description;  // one line for the table
  std::string bytes;        // the file
  // SubmitJob (and ScreenImage at the default max_pixels of 1e8) answers this code; its
  // message contains `submit_fragment` (OK: empty).
  absl::StatusCode submit_code = absl::StatusCode::kOk;
  std::string submit_fragment;
  // For accepted inputs, the job's final status through the real pipeline (target image).
  absl::StatusCode job_code = absl::StatusCode::kOk;
  std::string job_fragment;
  // Header expectations for accepted inputs (ReadImageHeader): as decoded.
  uint32_t width = 0, height = 0, channels = 0, bit_depth = 0, frames = 1, orientation = 1;
};

// `face` is an 8-bit BGR photo with one face near its centre (e.g. grace_hopper_512x600.jpg).
std::vector<HostileInput> MakeHostileCorpus(const cv::Mat& face);

// A PNG declaring width x height RGB 8-bit. `full_data`: its IDAT is a real zlib stream of the
// width*height zero pixels (a decompression bomb that decodes; ~1 MB for 20000x20000, built in
// about a second); otherwise one tiny IDAT (refused on its header; would fail to decode).
std::string PngBomb(uint32_t width, uint32_t height, bool full_data);

// `jpeg` (a JFIF file) with an EXIF APP1 carrying Orientation = `orientation` (1..8) right
// after SOI; the pixels are untouched.
std::string WithExifOrientation(const std::string& jpeg, uint16_t orientation);

}  // namespace fusion::testing
