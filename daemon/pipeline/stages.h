// The pipeline's stage computations on one model copy (host or device), for the stage bodies
// that the OOM ladder runs (pipeline_runner.cc). Implemented with LibTorch in stages.cc; this
// header has none. Results are OpenCV/host values, never tensors, so nothing a stage allocates
// in its device scope outlives the stage.
// Every function overwrites its outputs only on success (a retried attempt starts clean).
// Cancellation: the functions over several faces, tiles or detection passes ask `cp` before
// each one and return its CANCELLED (checkpoint.h) unchanged; the default never cancels.
// Errors: INVALID_ARGUMENT for inputs that break a network's contract; INTERNAL from LibTorch
// (messages name the network); exceptions propagate to the caller (the stage body), which
// turns a device OOM into DeviceOomError().
// Thread-safety: free functions; the model copy is used const.
#pragma once

#include <array>
#include <functional>
#include <string>
#include <vector>

#include <opencv2/core.hpp>

#include "absl/status/status.h"
#include "models/blend/blend.h"
#include "models/faceapi/types.h"
#include "models/geometry/frame_edge.h"
#include "pipeline/checkpoint.h"
#include "loader/model_store.h"

namespace fusion {

using FaceDescriptor = std::array<float, 128>;  // FaceRecognitionNet output; dlib distance < 0.6

struct DetectedFace {
  faceapi::FaceBox box;            // full-resolution pixels
  faceapi::Landmarks68 landmarks;  // full-resolution pixels
  FaceDescriptor descriptor{};
  bool described = false;
  // The detector's preference for the face turned by 180 degrees in the orientation check
  // (faceapi::DetectorUpsideDownLogit), and whether FindLandmarks found it upside down (its
  // landmarks are then those of the face righted: faceapi/upside_down.h).
  float upside_down_logit = 0;
  bool upside_down = false;
  // `upside_down` is known (a video face carried by its track, told at its detection): the
  // landmark net looks at the face only that way up.
  bool orientation_known = false;
  // FindLandmarks found its points on the face turned level (faceapi/level_roll.h). Set on a
  // face before FindLandmarks (a video track looked at level in the frame before), the net looks
  // at it level from a roll of kLevelKeepDeg rather than kLevelMinDeg: no switching between the
  // two shapes from frame to frame for a face rolled by about kLevelMinDeg.
  bool levelled = false;
};

// A detected face that is not upright (faceapi::EstimateOrientations): never swapped, named in
// the job's degradations (an upright face pasted across a sideways head is worse than a miss).
struct TurnedFace {
  faceapi::FaceBox box;         // full-resolution pixels
  int upright_turns = 0;        // 1 or 3 (face_orientation.h: either may be the upright one)
  float upright_score = 0;      // the detector's score with the face righted, and as it is
  float as_is_score = 0;
  // The frame edges its box is cut by (frame_edge.h CutEdges): the detector, shown a face cut by
  // the frame edge in its quarter turns, may like a turn better (bench/edge: 28 of 828 made cuts,
  // 26 at the top or bottom), so the note names the edge first.
  unsigned cut_edges = 0;
};

// A detected face too far outside the frame for a credible swap (frame_edge.h): never swapped,
// named in the job's degradations (CutFaceNote).
struct CutFace {
  faceapi::FaceBox box;     // the detector's box (clipped to the frame), full-resolution pixels
  unsigned edges = 0;       // the frame edges its 68 points or fitted box lie beyond (frame_edge.h CutEdge bits)
  float outside_share = 0;  // the share of the face outside the frame (frame_edge.h FaceOutsideShare)
};

// One image of the job as the stages see it.
struct Picture {
  std::string what;    // "source image", "target image", "reference image"
  cv::Mat bgr;         // CV_8UC3, full resolution
  cv::Mat rgb;         // CV_8UC3 RGB, full resolution (every stage reads it)
  std::vector<DetectedFace> faces;   // upright faces, by descending detector score
  std::vector<TurnedFace> turned;    // faces the detector finds turned by 90 or 270 degrees
  // The source or reference picture's analysis came from the face cache (face_cache.h): faces
  // holds its one face with landmarks and descriptor, `rgb` is empty, and the detect,
  // landmarks and encode stages skip the picture.
  bool analysed = false;
  std::vector<CutFace> cut;          // faces set aside as too far outside the frame (SetAsideCutFaces)
};

// "target image: the face at (x,y WxH) is turned sideways (the detector scores it 0.99 righted,
// 0.45 as it is): not swapped; store the image upright" (the job's degradation); for a box cut
// by the frame edge "target image: the face at (x,y WxH) is cut by the top edge of the frame, or
// turned sideways (the detector scores it 0.99 righted, 0.45 as it is): not swapped". No direction:
// SSD often scores an upside-down face like an upright one, so the turn that rights a sideways
// face and the opposite one (upside down) score alike (face_orientation.h). Faces turned by 180
// degrees are not "turned" faces: FindLandmarks rights them and they are swapped.
std::string TurnedFaceNote(const std::string& what, const TurnedFace& f);

// One target face being swapped.
struct SwapItem {
  size_t face = 0;              // index into the target's faces
  cv::Mat fused;                // CV_32FC3 RGB [0,1] generator output (enhanced: s times larger)
  cv::Mat target_crop;          // CV_32FC3 RGB [0,1], the generator's target input, same size
  cv::Matx23d frame_to_crop;    // frame pixels -> crop pixels of `fused`
};

// What the detect stage scans for (multiscale.h's MultiScaleOptions of the same names).
struct DetectSettings {
  int min_face_px = 40;   // smallest face width, full-resolution pixels
  float min_score = 0;    // 0 = the detector's default threshold
  int max_input = 1024;   // largest network input side of one pass (multiple of 32, >= 416)
  // Passes run at once, each on one thread with one intra-op thread (parallel.h), when the
  // stage runs untiled (tile_px 0); the stage's working set is then that many passes'. Tiled
  // runs take the passes one at a time. The boxes do not depend on it.
  int threads = 1;
};

// Faces of `pic` (boxes only), in full-resolution pixels, by descending score: the pyramid of
// multiscale.h over the full-resolution image. tile_px > 0 runs the same passes with each
// network's stride-8 stem in tile_px windows (FaceDetector::Detect): a smaller working set, the
// same boxes up to float order.
// Every box is then checked for its orientation (faceapi::EstimateOrientations, one more pass per
// 4 boxes): turned ones go to pic.turned, not pic.faces; upside down (180 degrees) is told by
// FindLandmarks. When the scan finds no face at all it runs once more on the picture turned by
// 180 degrees (in place, turned back after), its boxes turned back: SSD misses many upside-down
// faces (Grace Hopper turned, 0 boxes), so this costs time only where the job would fail.
// Checkpoint units: "pass", then "upside-down pass" (when no face was found), then
// "orientation pass". `on_pass(index, count)`, when given, is
// called before each scan pass (MultiScaleOptions::before_pass: concurrently when passes run at
// once), for the job's progress.
absl::Status DetectFaces(const ModelCopy& detector, int tile_px, const DetectSettings& settings, Picture& pic,
                         const Checkpoint& cp = {},
                         const std::function<void(size_t index, size_t count)>& on_pass = nullptr);
// The largest network input side DetectFaces uses on a w x h image with `detector` (a catalogue
// name): the detect stage's working set is its square. NOT_FOUND for a model that is no detector.
absl::StatusOr<int> LargestDetectInput(const std::string& detector, int w, int h, const DetectSettings& settings);
// The detect stage's admission for passes of at most `side` px: the pixels of settings.threads
// such inputs (the passes that run at once), and its estimate bucket.
inline uint64_t DetectStagePixels(int side, const DetectSettings& settings) {
  return static_cast<uint64_t>(side) * side * static_cast<uint64_t>(std::max(1, settings.threads));
}
std::string DetectStageBucket(int side, const DetectSettings& settings);
// 68 landmarks of every face of `pic` (full-resolution crops). Checkpoint units: "face".
// A box that touches the frame edge (frame_edge.h TouchesFrameEdge) is extended beyond the frame
// (ExtendedFaceBox) and the net sees that box with zeros outside the frame: its points may then
// lie outside the frame. The mean face fitted to the points inside the frame (FitMeanFace) then
// gives the whole face's box (FittedNetBox), and the net looks again, up to kRefitPasses times,
// until that box overlaps the last by kRefitStopIoU. A box inside the frame is cropped as it is.
// Each face whose orientation is not known (DetectedFace::orientation_known) is looked at upside down as well (faceapi/upside_down.h: one more landmark forward
// of its crop turned by 180 degrees); a face found upside down gets the landmarks of its crop
// righted, turned back into the frame (upside_down set), so that the later stages, which align
// by the eye line, swap it as they swap any rolled face. A face whose points put its eye line
// 25-90 degrees off level gets them again on its box turned level (faceapi/level_roll.h: the
// net was trained on upright faces, and a 45-degree face got an upright shape across it). Other
// faces keep the points found as they are, bit for bit.
inline constexpr int kRefitPasses = 2;
inline constexpr float kRefitStopIoU = 0.9f;
absl::Status FindLandmarks(const ModelCopy& landmarks, Picture& pic, const Checkpoint& cp = {});
// Moves the faces of `pic` more than `max_share` outside the frame (frame_edge.h
// FaceOutsideShare) from pic.faces to pic.cut, in order. Needs the landmarks.
void SetAsideCutFaces(Picture& pic, float max_share = kMaxOutsideShare);
// Descriptors of the faces of `pic` whose index is in `which` (all when empty). Units: "face".
absl::Status DescribeFaces(const ModelCopy& recognition, Picture& pic, const std::vector<size_t>& which,
                           const Checkpoint& cp = {});
// Descriptor of the face with `landmarks` in `rgb`.
absl::Status Describe(const ModelCopy& recognition, const cv::Mat& rgb,
                      const faceapi::Landmarks68& landmarks, FaceDescriptor* out);
// Fuses the source face into each target face of `items` (their `face` set): aligned crops of
// the full-resolution frames, the generator at `ratio`. `device` "cpu" or "cuda:N".
// Checkpoint units: "face". `notes` (optional) is set to what the result cannot carry of the
// source face: the generator's SourceNotes, and a source face under kSmallSourceFacePx wide.
// `threads` > 1: that many faces at once, each on one thread (parallel.h); the same results.
inline constexpr int kSmallSourceFacePx = 80;
absl::Status Generate(const ModelCopy& generator, const std::string& device, const Picture& source,
                      const Picture& target, double ratio, std::vector<SwapItem>& items,
                      const Checkpoint& cp = {}, std::vector<std::string>* notes = nullptr, int threads = 1);
// Super-resolves `rgb01` (CV_32FC3 RGB [0,1]) with an ESRGAN copy: output s times larger;
// tile_px > 0 cuts the input into tiles with the model's halo (same result up to float order);
// then only one tile and its output are tensors at a time (in the caller's scope) and the whole
// output is assembled in a host image (an OpenCV buffer, outside every tier's scope: the caller
// admits it, e.g. the upscale's host lease). Checkpoint units: "tile" (row-major), when tiled.
absl::Status Enhance(const ModelCopy& enhancer, const std::string& device, int tile_px, cv::Mat& rgb01,
                     const Checkpoint& cp = {});
// The model's scale (output side / input side) of an enhancer copy; 0 for another model.
int EnhanceScale(const ModelCopy& enhancer);

// Blends each face of `faces` into `frame_bgr` (CV_8UC3 BGR) in turn: the simple (feathered)
// mode of models::BlendFace (blend.h) as at:: ops on `blender.device` (a feather-blend copy).
// Per face, over the hull's bounding box B (h x w frame pixels):
//   change [1,3,h,w] fp32 = (fused - target crop, BGR, 0-255 units) sampled with
//     at::grid_sampler (bilinear, zeros outside the crop, align_corners false: pixel centres at
//     integer coordinates, as cv::warpAffine with WARP_INVERSE_MAP) at frame_to_crop(pixel);
//   weight [1,1,h,w] fp32 = hull mask eroded by r (-max_pool2d(-mask), reading the mask r pixels
//     around B as cv::erode does on a ROI), Gaussian-blurred ((2r+1)^2 kernel, sigma r/2,
//     replicate border; separable conv2d), times the hull mask; r = FeatherRadiusPx;
//   out = round(clamp(target + weight * change, 0, 255)) where weight > 0, else target's bytes.
// The hull polygon and r are host geometry (blend.h). The grid reproduces warpAffine's 1/32-px
// fixed point, so the bytes equal BlendFace simple mode's up to float order (blend_device_test:
// byte-identical on the test photos; tolerance 1 level). Overwrites `frame_bgr` only when every face succeeded. Errors: ValidateBlendInput's
// INVALID_ARGUMENT, with the face index; INVALID_ARGUMENT when `blender` is not a blender or
// `options.mode` is not kSimple (of the options only feather_fraction matters then).
// Checkpoint units: "face".
absl::Status BlendSimpleOnDevice(const ModelCopy& blender, const std::vector<models::BlendInput>& faces,
                                 const models::BlendOptions& options, cv::Mat* frame_bgr,
                                 const Checkpoint& cp = {});

// A source-face choice: index of the largest face (box area), or -1 when there is none.
int LargestFace(const std::vector<DetectedFace>& faces);
float DescriptorDistance(const FaceDescriptor& a, const FaceDescriptor& b);

}  // namespace fusion
