// Multi-scale face detection over an image pyramid planned from face sizes in pixels.
//
// A single-pass detector finds faces reliably only within a band of widths in network-input
// pixels (DetectorTraits::face_min_px..face_max_px, measured with bench/detect `curve`). The
// pyramid maps every face from min_face_px (pixels of the image scanned) up to the whole frame
// into that band at some level:
//   level 0 scale s0 = min(max_upscale, face_min_px / min_face_px) (network px per image px),
//   level k scale s0 / 2^k, down to the first level where the whole frame's short side is at
//   most face_max_px (a face filling the frame is in the band there).
// The band spans a factor >= 2, so a face is in it at one level at least, and near twice its
// lower end at the next finer level as well.
// A level whose image (W*s x H*s) fits one network input runs as one pass (a free-input
// detector at round32(side), within 10% of the cap still one pass); a larger level runs in
// square tiles of `tile side` = max_input (the fixed input for SSD) network pixels that
// overlap by 2 * face_max_px, so every face the level or the next coarser one finds reliably is
// whole in some tile; a box touching an inner tile edge is dropped (its whole copy is in the
// neighbour). Each pass cuts its region from the full-resolution image and resizes it with
// INTER_AREA to the pass's input: a pass never holds more than max_input^2 network pixels,
// whatever the image size, and passes run one at a time (MultiScaleOptions::for_each_pass may
// run k at once: then k of them).
// A fixed-input detector whose response has a gap (SSD: DetectorTraits::second_look) gets one
// more whole-image pass after the coarsest level, the image filling second_look of the input
// (zero-padded): otherwise a face in the gap at the coarsest level, with no finer level (a small
// frame at a large min_face_px: one pass) or too wide for the finer level's cap, is looked at once.
// Boxes narrower than face_min_px / 2 network pixels are dropped at every level (the detector is
// unreliable there: a face that small is in the band at a finer level, or below min_face_px), as
// are boxes wider than 2 * face_max_px at a level that is not the coarsest (such a face is in
// the band at a coarser level; SSD's 0.53 box on a shoulder in sample6 came from there). All
// kept boxes, in image pixels, are merged with greedy NMS at nms_iou, then a box sharing >= 70%
// of the smaller box's area with a higher-scoring one is dropped (the same face at another
// level with another extent); a weak box (score < confirm_below) must be seen by a second pass
// as well, by a kept box or one scoring from the detector's support_score up to the threshold
// (passes then detect down to support_score; such boxes only confirm, they are never kept).
// Each box left is then the vote of the kept boxes at IoU >= nms_iou with it scoring up to 0.02
// below it (weights falling linearly to 0 there; its score unchanged): a near-tie between two
// levels' boxes of one face no longer flips the face's box on a score shift of a few thousandths
// (fp32 vs bf16: grid50's 150-px face got a too-tight box and was not swapped).
// The rolled second look (MultiScaleOptions::relook_rolls, when the detector has a support score
// under its threshold): the scan's boxes from support_score up that no pass kept (sub-threshold,
// or weak and unconfirmed), apart from the faces found (sharing < 30% of their area with one),
// best first, at most max_relooks of them, are looked at once more as context views
// (context_views.h: the box's square of 2.2x its side in a 128-px cell, the face ~58 px wide,
// inside SSD's reliable band), as they are and rolled by -15, +15, -30 and +30 degrees, 16 views
// to a pass; one whose best view scores at least max(confirm_below, threshold) is kept with that
// view's box mapped back (the scan saw it once under the threshold; the centred, righted view is
// the second look). SSD scores a rolled face low in every pass: sample4's laughing face, rolled
// ~25 degrees and cut to a 256-px cell of the bench's grid, 0.46 at best, was missed; its views
// score 0.67 as it is, 0.89 rolled by +15, 0.82 by +30. Measured (bench/detect): a 2400x1600
// collage of faces rolled by 40 degrees 31 -> 35 of 37, rolled by 20 35 -> 37; sweep 1280x960
// 109 -> 112 of 120; no box on the group photos with their faces painted out, as they are and
// rolled by 20 degrees (tests), nor on the quality bench's clutter. Cost: one pass per 3.2
// candidates (none on the six group photos, one on grid50).
// Proposal gating (DetectorTraits::proposal_score > 0, MultiScaleOptions::gate_tiles):
// a level of several tiles whose next coarser level has whole-image or tile passes of its own
// does not run its tiles. That coarser level's passes detect down to proposal_score (SSD: 0.05)
// and each of their boxes up to 1.05 * face_max_px network px wide is a proposal: a face the
// finer level keeps (up to 2 * face_max_px there) is a box half as wide one level up. The finer
// level then runs windows instead: squares of its tile side (the same input and scale as a
// tile), placed so each proposal's square (1.25x its box side, at least 96 network px of the
// finer level) lies whole in one, clear of the window's inner edges by 32 network px of context
// (a face packed up to a window's edge can score far lower: the seam test's 0.79 -> 0.38, which
// put it under the threshold in bf16 and not in fp32); a window takes every later
// proposal (reading order) that still fits. When that is as many passes as the level's tiles,
// the tiles run. A proposing level runs all of its passes (a gated one would propose only where
// its own coarser level did: 10-20 px boxes there, which SSD does not see), so on the pyramid
// gating alternates: 0, 2, ... gated, 1, 3, ... proposing. A proposing pass that returns the
// detector's cap of boxes (DetectorTraits::max_boxes) runs the planned tiles under it as well.
// Measured (bench/detect `curve ssd --min-score 0.05`): a box at IoU >= 0.2 for 22 of 23 faces
// at 20 px, 23 of 23 at 24-96 px, with 3-17 boxes elsewhere on the 23 clutter canvases (0.1:
// 18 of 23 at 20 px, so not 0.1). sample1 (1920x1280, 3 faces): 4 windows instead of 15 tiles,
// 12 of 23 passes; the group photos 10-14 of 23-28. The trade: a window is another crop than
// the tiles, so a face seen only at a gated level can get a box a few px different, or (near
// the detector's threshold) be found in one and not the other: a 1920x1280 collage of 99 faces
// of 40-90 px (bench/detect `collage`), 94 found either way, 3 of them different faces; the
// bench/quality rows (group photos, casts, rolled, collage, grid, mosaic) find the same faces
// with no false box, some boxes of grid50 and the mosaic a few px off.
// Cost: about (face_min_px / min_face_px)^2 * W * H * 4/3 network pixels plus the tile overlap
// without gating; e.g. ssd at 40 px: 23 passes planned for 1920x1280 (12 run with gating),
// ~700 planned for 80 MP.
// Thread-safety: stateless functions; the detector must be safe for concurrent const use.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include <opencv2/core/types.hpp>

#include "models/faceapi/detector.h"

namespace fusion::faceapi {

struct MultiScaleOptions {
  int min_face_px = 40;        // smallest face width to find, pixels of the image scanned (> 0)
  float max_upscale = 2.0f;    // level 0 never enlarges the image more than this
  int max_input = 1024;        // free-input detectors: largest network input side (>= 416, x32)
  float min_score = 0;         // detector score threshold; 0 = the detector's default
  float nms_iou = 0.4f;        // merge threshold across levels and tiles
  // A merged box scoring below this is kept only when a box of another pass (tile or level)
  // overlaps it at IoU >= 0.3; 0 = off; < 0 = the detector's DetectorTraits::confirm_below.
  // Measured (ssd at 0.72, bench/detect): removes the 0.71 box on Grace Hopper's cap badge
  // (grey) at a cost of 3 of 150 faces of 40-80 px on clutter.
  float confirm_below = -1;
  int tile_px = 0;             // > 0: each pass runs its stem in windows (FaceDetector::Detect)
  // Tiles of a gated level run only around the next coarser level's proposals (see above);
  // false = every planned pass runs (the full scan, for comparisons).
  bool gate_tiles = true;
  // The rolled second look (above): each candidate's context views at these rolls, degrees
  // counter-clockwise (cv::getRotationMatrix2D); empty = none. At most max_relooks candidates,
  // best first; its passes are numbered after the scan's in before_pass.
  std::vector<float> relook_rolls = {0.f, -15.f, 15.f, -30.f, 30.f};
  int max_relooks = 16;
  // Called before pass `index` (0-based) of `count`; a non-OK status ends the scan with it
  // unchanged (the pipeline's cancellation checkpoint). Null = none.
  std::function<absl::Status(size_t index, size_t count)> before_pass;
  // Runs body(i) for every pass i in [0, count), possibly several at once (then `before_pass`
  // and the detector are called concurrently); returns the first failure by index. The boxes
  // do not depend on it: each pass's are kept apart and merged in pass order. Null = the passes
  // in order on the calling thread.
  std::function<absl::Status(size_t count, const std::function<absl::Status(size_t)>& body)> for_each_pass;
};

// One detector run: `region` of the image (pixels) resized so its longer side is `input_size`.
struct DetectionPass {
  cv::Rect region;
  int input_size = 0;
  int level = 0;        // pyramid level, 0 = finest
  bool coarsest = false;
  // The region's longer side fills this fraction of input_size; the rest of the input is zero
  // (DetectorTraits::second_look). 1 = the region is resized to the whole input.
  float fill = 1.0f;
};

// The passes for an image of w x h pixels, finest level first.
std::vector<DetectionPass> PlanPasses(const DetectorTraits& detector, int w, int h, const MultiScaleOptions& options);
inline std::vector<DetectionPass> PlanPasses(const FaceDetector& detector, int w, int h, const MultiScaleOptions& options) {
  return PlanPasses(detector.Traits(), w, h, options);
}
// The largest network input side of PlanPasses (the detect stage's working set is its square).
int LargestPassInput(const DetectorTraits& detector, int w, int h, const MultiScaleOptions& options);

// Runs every pass on `rgb` (CV_8UC3 RGB, full resolution) and merges. INVALID_ARGUMENT for a bad
// image or option; errors from the detector pass through (naming the pass).
absl::StatusOr<std::vector<FaceBox>> DetectMultiScale(const FaceDetector& detector, const cv::Mat& rgb,
                                                      const MultiScaleOptions& options = {});

}  // namespace fusion::faceapi
