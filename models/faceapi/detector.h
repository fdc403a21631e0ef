// FaceDetector: what the multi-scale driver needs from a single-pass face detector
// (TinyFaceDetector, SsdMobilenetV1).
// Thread-safety: Detect() is const and may run concurrently; implementations hold no mutable
// state besides their weights, which only move with To() (not concurrently with Detect()).
#pragma once

#include <string>
#include <vector>

#include <opencv2/core/mat.hpp>

#include "absl/status/statusor.h"
#include "models/faceapi/types.h"

namespace fusion::faceapi {

// What the pyramid planner (multiscale.h) needs to know about a detector.
struct DetectorTraits {
  bool free_input = true;  // any multiple of 32 as input side; else fixed at fixed_input
  int fixed_input = 0;
  // Face widths, network-input pixels, that one pass finds reliably: >= 95% of the 23 face
  // crops of tests/models/collage.h, each alone on clutter (bench/detect `curve`).
  int face_min_px = 0, face_max_px = 0;
  // multiscale.h: a merged box scoring below this needs a second pass's box (0 = off).
  float confirm_below = 0;
  // Fixed-input detectors: > 0 adds one more whole-image pass whose image fills this fraction of
  // the input side (zero-padded), so a face in a gap of the single-pass response at the
  // coarsest level is seen at another width as well (multiscale.h). 0 = none.
  float second_look = 0;
  // The detector's score threshold at Detect's min_score 0 (multiscale.h: what a kept box scores).
  float min_score = 0;
  // multiscale.h: a pass's boxes from this score up to the threshold are never kept, but one of
  // them confirms a weak box of another pass (a face that scores 0.72 at one level is seen at
  // 0.3-0.5 at the next, where a cap badge or a pattern is not). 0 = only kept boxes confirm.
  float support_score = 0;
  // multiscale.h: the passes of a level that proposes detect down to this score, and their boxes
  // from it up pick the tiles the next finer level runs (0 = every tile runs). Must recall every
  // face the finer level would find (bench/detect `curve --min-score`).
  float proposal_score = 0;
  // The most boxes one Detect returns (0 = no cap): a proposing pass that returns this many may
  // have lost proposals to the cap, so every finer tile under it runs.
  int max_boxes = 0;
};

// Measured with `fusion_detect_bench curve tiny 416` (recall per face width): 12-24 px 0/23,
// 32 px 4/23, 40 px 16/23, 48 px 21/23, 56 px 22/23, 64-96 px 22-23/23, 128 px 20/23, 192 px 16/23,
// 256 px 13/23.
// No confirmation: tiny's true faces often score 0.5-0.7 in one pass only (18 of 21 group faces
// left with 0.72), and its false boxes score up to 0.99 - confirmation cannot separate them.
inline constexpr DetectorTraits kTinyFaceDetectorTraits{true, 0, 48, 96, 0};
// Measured with `fusion_detect_bench curve ssd` at its fixed 512 input.
// SSD at 512: 12-24 px 5-16/23, 32 px 19/23, 36 px 21/23, 40-60 px 23/23, 64-72 px 21/23, 80 px
// 18/23, 88 px 14/23, 96 px 18/23, 112 px 21/23, 128-288 px 21-23/23, 320-416 px 20-16/23: two
// bands (its anchors of two feature maps) with a gap at 64-96 px. The coarsest level gets a
// second look at 0.6x, which puts the gap at 38-58 px (a face in the gap at a finer level is at
// 32-48 px one level coarser). Keeping boxes up to 288 px below the coarsest level as well found
// no more faces (bench/detect `sweep`) and changed the group photos' boxes (squarer, from the
// 200-px view), so the 2 * face_max_px cap stays.
// Confirmation below 0.72, by a box of another pass from 0.3 up: see multiscale.h. Support
// from 0.3 (not only kept boxes, >= 0.5): sample4's laughing, rolled face cut to a 150-px cell
// of the bench's grid scores 0.72 at one level and 0.3-0.5 at the others, and was missed. Its
// other copy scores 0.46 at best: boxes from 0.3 up that are not kept get the rolled second look
// (multiscale.h).
// Proposals from 0.05 (`curve ssd --min-score 0.05`): a box at IoU >= 0.2 for 22/23 faces at
// 20 px and 23/23 at 24-96 px; at 0.1 only 18/23 at 20 px. At most 100 boxes (Options::max_results).
inline constexpr DetectorTraits kSsdMobilenetV1Traits{false, 512, 40, 80, 0.72f, 0.6f, 0.5f, 0.3f, 0.05f, 100};
// By catalogue model name ("tiny_face_detector", "ssd_mobilenetv1"); NOT_FOUND otherwise.
absl::StatusOr<DetectorTraits> DetectorTraitsOf(const std::string& model);

class FaceDetector {
 public:
  virtual ~FaceDetector() = default;
  // Faces in `rgb` (CV_8UC3, RGB) with score > min_score (0 = the detector's default threshold),
  // after NMS, in pixels of `rgb`. `input_size` is the square network input side (0 = DefaultInputSize()); detectors
  // with a fixed input (SSD) accept only 0 or that size. tile_px > 0 runs the network's
  // high-resolution layers in windows of that many input pixels (ops::TiledPrefix): a smaller
  // working set, the same boxes up to float order. INVALID_ARGUMENT for a bad image or size,
  // INTERNAL for a LibTorch failure (message names the network).
  virtual absl::StatusOr<std::vector<FaceBox>> Detect(const cv::Mat& rgb, int input_size = 0, int tile_px = 0,
                                                      float min_score = 0) const = 0;
  virtual int DefaultInputSize() const = 0;
  // True when Detect accepts any multiple of 32 as input size; false when fixed.
  virtual bool FreeInputSize() const = 0;
  virtual DetectorTraits Traits() const = 0;
};

}  // namespace fusion::faceapi
