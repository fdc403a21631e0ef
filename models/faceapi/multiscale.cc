#include "models/faceapi/multiscale.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "models/faceapi/context_views.h"
#include "base/status_macros.h"

namespace fusion::faceapi {
namespace {

constexpr int kOverlapMarginPx = 32;  // network pixels

int Round32Up(double v) { return std::max(32, static_cast<int>(std::ceil(v / 32.0 - 1e-9)) * 32); }

// Starts of the fewest tiles of side t covering [0, len) with consecutive tiles sharing at
// least `overlap` pixels, evenly spread. len <= t: one tile.
std::vector<int> TileStarts(int len, int t, int overlap) {
  if (len <= t) return {0};
  const int n = static_cast<int>(std::ceil(static_cast<double>(len - overlap) / (t - overlap)));
  std::vector<int> starts;
  for (int i = 0; i < n; ++i) starts.push_back(static_cast<int>(std::floor(static_cast<double>(len - t) * i / (n - 1))));
  return starts;
}

// True when `b` (in image pixels) touches an edge of `r` that is not an image edge.
bool TouchesInnerEdge(const FaceBox& b, const cv::Rect& r, int w, int h, float margin) {
  return (r.x > 0 && b.x <= r.x + margin) || (r.y > 0 && b.y <= r.y + margin) ||
         (r.x + r.width < w && b.x + b.w >= r.x + r.width - margin) ||
         (r.y + r.height < h && b.y + b.h >= r.y + r.height - margin);
}

int TileSide(const DetectorTraits& d, const MultiScaleOptions& o) { return d.free_input ? o.max_input : d.fixed_input; }

// The passes of one level at scale s (network pixels per image pixel).
void PlanLevel(const DetectorTraits& d, int w, int h, double s, int level, const MultiScaleOptions& o,
               std::vector<DetectionPass>& out) {
  const int t = TileSide(d, o);
  const double side = std::max(w, h) * s;
  if (side <= t * (d.free_input ? 1.1 : 1.0)) {  // one pass over the whole image
    out.push_back({cv::Rect(0, 0, w, h), d.free_input ? std::min(t, Round32Up(side)) : t, level, false});
    return;
  }
  // Tiles of t network pixels = t / s image pixels; the overlap holds the level's largest face
  // (face_max_px) with kOverlapMarginPx to spare for the box's own error.
  const int tile = static_cast<int>(std::floor(t / s));
  const int overlap = static_cast<int>(std::ceil((d.face_max_px + kOverlapMarginPx) / s));
  for (int y : TileStarts(h, tile, overlap)) {
    for (int x : TileStarts(w, tile, overlap)) {
      out.push_back({cv::Rect(x, y, std::min(tile, w), std::min(tile, h)), t, level, false});
    }
  }
}

// The merged boxes scoring >= confirm_below, and those below it that a box of another pass
// (another tile or level; a kept box of `all` or a sub-threshold one of `support`) overlaps at
// IoU >= 0.3: one pass's weak box alone is too often a badge or a pattern, and a missed face
// costs less than a face pasted onto one.
std::vector<FaceBox> Confirmed(const std::vector<FaceBox>& all, const std::vector<size_t>& pass_of,
                               const std::vector<FaceBox>& support, const std::vector<size_t>& support_pass_of,
                               std::vector<FaceBox> merged, float confirm_below) {
  std::vector<FaceBox> kept;
  for (const FaceBox& m : merged) {
    size_t own = SIZE_MAX;  // NMS keeps boxes unchanged: m is one of `all`
    for (size_t j = 0; j < all.size() && own == SIZE_MAX; ++j) {
      if (all[j].x == m.x && all[j].y == m.y && all[j].w == m.w && all[j].score == m.score) own = pass_of[j];
    }
    bool confirmed = m.score >= confirm_below;
    for (size_t j = 0; j < all.size() && !confirmed; ++j) confirmed = pass_of[j] != own && IoU(all[j], m) >= 0.3f;
    for (size_t j = 0; j < support.size() && !confirmed; ++j) {
      confirmed = support_pass_of[j] != own && IoU(support[j], m) >= 0.3f;
    }
    if (confirmed) kept.push_back(m);
  }
  return kept;
}

// The area two boxes share (0 when apart).
float SharedArea(const FaceBox& a, const FaceBox& b) {
  const float iw = std::min(a.x + a.w, b.x + b.w) - std::max(a.x, b.x);
  const float ih = std::min(a.y + a.h, b.y + b.h) - std::max(a.y, b.y);
  return iw > 0 && ih > 0 ? iw * ih : 0.f;
}

// Greedy suppression by containment, after NMS: a box that shares at least kContainedShare of
// the smaller box's area with a higher-scoring kept box is the same face seen at another level
// or tile with a different extent (e.g. SSD's 0.55 box of 55x71 px around the 0.95 box of 31x46
// px on a 46-px face of the bench's collage: IoU 0.37, under nms_iou, so NMS kept both and the
// face was swapped twice). Two visible faces cannot share most of the smaller one's box.
constexpr float kContainedShare = 0.7f;
std::vector<FaceBox> SuppressContained(std::vector<FaceBox> merged) {
  std::stable_sort(merged.begin(), merged.end(), [](const FaceBox& a, const FaceBox& b) { return a.score > b.score; });
  std::vector<FaceBox> kept;
  for (const FaceBox& m : merged) {
    bool contained = false;
    for (const FaceBox& k : kept) {
      const float shared_area = SharedArea(m, k);
      if (shared_area > 0 && shared_area >= kContainedShare * std::min(m.w * m.h, k.w * k.h)) contained = true;
    }
    if (!contained) kept.push_back(m);
  }
  return kept;
}

// A second-look candidate sharing this much of its area with a face found is that face.
constexpr float kRelookTakenShare = 0.3f;

// Box voting among near-ties: each merged box becomes the weighted mean of the boxes (every
// pass's kept ones) that overlap it at IoU >= nms_iou and score at most kVoteBand below it, each
// weighted 1 - (its score's distance below) / kVoteBand; the score stays the merged box's. Greedy
// NMS alone takes the top box's extent, so two levels' near-tied boxes of one face (of different
// extents) swap places on a shift of a few thousandths (fp32 -> bf16) and the face's box with
// them; voted, the box moves with the scores continuously. kVoteBand is SSD's bf16 score
// tolerance (onednn_test.cc).
constexpr float kVoteBand = 0.02f;
std::vector<FaceBox> Voted(const std::vector<FaceBox>& all, std::vector<FaceBox> merged, float nms_iou) {
  for (FaceBox& m : merged) {
    double sw = 0, x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    for (const FaceBox& a : all) {
      if (a.score > m.score || IoU(a, m) < nms_iou) continue;
      const double wt = 1.0 - (m.score - a.score) / kVoteBand;
      if (wt <= 0) continue;
      sw += wt, x0 += wt * a.x, y0 += wt * a.y, x1 += wt * (a.x + a.w), y1 += wt * (a.y + a.h);
    }
    if (sw <= 0) continue;  // m is one of `all` at weight 1: not reached
    m.x = static_cast<float>(x0 / sw), m.y = static_cast<float>(y0 / sw);
    m.w = static_cast<float>(x1 / sw) - m.x, m.h = static_cast<float>(y1 / sw) - m.y;
  }
  return merged;
}

// Proposal gating (multiscale.h): a tiled level's tiles run only where the next coarser level,
// scanned whole, saw something.
enum class LevelRole { kFull, kProposes, kGated };

// Per level (index = DetectionPass::level): from the finest up, a level of several tiles whose
// next coarser level has regular passes is gated and that level proposes; a proposing level
// runs every pass (a gated one's proposals would miss what its skipped tiles hold), so gating
// alternates (levels 0, 2, ... with 1, 3, ... whole). proposal_score 0: every level full.
std::vector<LevelRole> LevelRoles(const std::vector<DetectionPass>& passes, float proposal_score) {
  const int levels = passes.empty() ? 0 : passes.back().level + 1;
  std::vector<int> regular(levels, 0);
  for (const DetectionPass& p : passes) regular[p.level] += p.fill == 1;
  std::vector<LevelRole> role(levels, LevelRole::kFull);
  if (!(proposal_score > 0)) return role;
  for (int level = 0; level + 1 < levels; ++level) {
    if (role[level] != LevelRole::kFull || regular[level] < 2 || regular[level + 1] == 0) continue;
    role[level] = LevelRole::kGated;
    role[level + 1] = LevelRole::kProposes;
  }
  return role;
}

// A proposal's box is at most this many face_max_px wide (network px of the proposing level):
// the finer level keeps boxes up to 2 * face_max_px of its own, half that here, with room for
// the box's error.
constexpr float kProposalMaxShare = 1.05f;
// Around a proposal, the square a window must hold whole: this many times its box side, and at
// least kProposalMinSidePx network px of the finer level (a 40-80 px face there is a 20-40 px box
// here, off-centre by a few px).
constexpr float kProposalGrow = 1.25f;
constexpr int kProposalMinSidePx = 96;
// A proposal's square keeps this many network px of the window between it and the window's inner
// edges: SSD can score a face near a crop edge far lower than in the middle (the seam test's
// 70-px face: 0.79 with its box 64+ px from the window's edge, 0.63 at 32 px, 0.38-0.52 at 16-19
// px, fp32 and bf16 alike), so a window packed up to its edge put one of two faces under the
// threshold in one precision and not the other.
constexpr int kProposalContextPx = 32;

// The windows a gated level runs instead of its tiles: squares of `side` image px (the level's
// tile, clipped to the w x h image) placed so each proposal's square (kProposalGrow) lies whole
// inside one, clear of its inner edges (where a box is dropped, TouchesInnerEdge); proposals are
// taken in reading order and a window takes every later one that still fits with it.
std::vector<cv::Rect> ProposalWindows(const std::vector<FaceBox>& proposals, int side, double scale, int w, int h) {
  const cv::Rect2d image(0, 0, w, h);
  std::vector<cv::Rect2d> need;
  for (const FaceBox& b : proposals) {
    const double e = std::max<double>(kProposalGrow * std::max(b.w, b.h), kProposalMinSidePx / scale);
    need.push_back(cv::Rect2d(b.x + b.w / 2 - e / 2, b.y + b.h / 2 - e / 2, e, e) & image);
  }
  std::stable_sort(need.begin(), need.end(), [](const cv::Rect2d& a, const cv::Rect2d& b) {
    return a.y + a.height / 2 < b.y + b.height / 2 || (a.y + a.height / 2 == b.y + b.height / 2 && a.x < b.x);
  });
  // TouchesInnerEdge's margin, 2 px to spare, and kProposalContextPx of context.
  const double clear = std::ceil(0.01 * side) + 2 + kProposalContextPx / scale;
  const double inner = side - 2 * clear;
  std::vector<cv::Rect> windows;
  std::vector<char> taken(need.size(), 0);
  auto inside = [&](const cv::Rect2d& e, const cv::Rect& r) {
    const cv::Rect2d in(r.x > 0 ? r.x + clear : 0, r.y > 0 ? r.y + clear : 0,
                        r.width - (r.x > 0 ? clear : 0) - (r.x + r.width < w ? clear : 0),
                        r.height - (r.y > 0 ? clear : 0) - (r.y + r.height < h ? clear : 0));
    return (e & in) == e;
  };
  for (size_t i = 0; i < need.size(); ++i) {
    if (taken[i]) continue;
    bool held = false;
    for (const cv::Rect& r : windows) held = held || inside(need[i], r);
    if (held) continue;
    cv::Rect2d u = need[i];
    for (size_t j = i + 1; j < need.size(); ++j) {
      const cv::Rect2d v = u | need[j];
      if (!taken[j] && v.width <= inner && v.height <= inner) u = v, taken[j] = 1;
    }
    auto place = [&](double centre, int len) {  // the window's start on one axis
      if (len <= side) return 0;
      return std::clamp(static_cast<int>(std::lround(centre - side / 2.0)), 0, len - side);
    };
    windows.emplace_back(place(u.x + u.width / 2, w), place(u.y + u.height / 2, h), std::min(side, w), std::min(side, h));
  }
  return windows;
}

// The rolled second look (multiscale.h): the boxes of `pool` apart from the faces `found`, best
// first, at most options.max_relooks, looked at as context views at options.relook_rolls; a
// candidate whose best view scores `accept` or more joins the faces with that view's box. Its
// passes are numbered after the scan's `scanned` ones in options.before_pass.
absl::StatusOr<std::vector<FaceBox>> WithSecondLook(const FaceDetector& detector, const cv::Mat& rgb,
                                                    std::vector<FaceBox> found, const std::vector<FaceBox>& pool,
                                                    const MultiScaleOptions& options, float support_score, float accept,
                                                    size_t scanned) {
  std::vector<FaceBox> candidates;
  for (const FaceBox& c : Nms(pool, options.nms_iou)) {
    bool taken = false;
    for (const FaceBox& f : found) taken = taken || SharedArea(c, f) >= kRelookTakenShare * c.area();
    if (!taken && static_cast<int>(candidates.size()) < options.max_relooks) candidates.push_back(c);
  }
  if (candidates.empty()) return found;
  std::vector<ContextView> views;
  for (const FaceBox& c : candidates) {
    for (float roll : options.relook_rolls) views.push_back({c, roll});
  }
  const size_t relook_passes = (views.size() + kViewCellsPerPass - 1) / kViewCellsPerPass;
  auto before = [&options, scanned, relook_passes](size_t i, size_t) {
    return options.before_pass ? options.before_pass(scanned + i, scanned + relook_passes) : absl::OkStatus();
  };
  ASSIGN_OR_RETURN(std::vector<ViewAnswer> seen, LookAgain(detector, rgb, views, support_score, options.tile_px, before));
  const size_t k = options.relook_rolls.size();
  std::vector<FaceBox> more;
  for (size_t c = 0; c < candidates.size(); ++c) {
    const ViewAnswer* best = &(seen)[c * k];
    for (size_t j = 1; j < k; ++j) {
      if ((seen)[c * k + j].score > best->score) best = &(seen)[c * k + j];
    }
    if (best->score >= accept) more.push_back(best->box);
  }
  if (more.empty()) return found;
  found.insert(found.end(), more.begin(), more.end());
  return SuppressContained(Nms(found, options.nms_iou));
}

// DetectMultiScale's scores, from the options and the detector's traits.
struct ScanScores {
  float confirm_below;   // a merged box under it needs another pass's box (Confirmed)
  float threshold;       // the scan's score threshold
  bool with_support;     // passes detect down to the support score (and confirmation is on)
  float pass_score;      // the score passes detect down to (0: the detector's threshold)
  float scan_floor;      // the scan's own boxes score above it
  float proposal_score;  // proposing passes detect down to it
};

ScanScores ScoresFor(const DetectorTraits& traits, const MultiScaleOptions& options) {
  ScanScores s;
  s.confirm_below = options.confirm_below < 0 ? traits.confirm_below : options.confirm_below;
  // Passes detect down to the support score when it is below the threshold (and confirmation is
  // on); greedy NMS visits boxes by score, so the boxes at or above the threshold are the same.
  s.threshold = options.min_score > 0 ? options.min_score : traits.min_score;
  s.with_support = s.confirm_below > 0 && traits.support_score > 0 && s.threshold > traits.support_score;
  s.pass_score = s.with_support ? traits.support_score : options.min_score;
  // Proposing passes detect down to the proposal score; the scan's own boxes stay those above
  // `scan_floor` (Detect keeps score > min_score, 0 = the detector's threshold).
  s.scan_floor = s.pass_score > 0 ? s.pass_score : s.threshold;
  s.proposal_score = std::min(traits.proposal_score, s.scan_floor);
  return s;
}

// One pass's input: p.region of rgb resized so its longer side is exactly the input (the
// detector's own square padding then needs no further resize, and INTER_AREA averages the pixels
// a downscale drops); `size` is the region's size there.
cv::Mat PassInput(const cv::Mat& rgb, const DetectionPass& p, cv::Size& size) {
  const double k = p.input_size * static_cast<double>(p.fill) / std::max(p.region.width, p.region.height);
  size = cv::Size(std::clamp(static_cast<int>(std::lround(p.region.width * k)), 1, p.input_size),
                  std::clamp(static_cast<int>(std::lround(p.region.height * k)), 1, p.input_size));
  cv::Mat scaled;  // one pass's input
  if (p.fill < 1) {  // top-left in a zero square of the input: box coordinates stay the image's
    scaled = cv::Mat::zeros(p.input_size, p.input_size, CV_8UC3);  // one input's bytes, as any pass
    cv::Mat corner = scaled(cv::Rect(0, 0, size.width, size.height));
    cv::resize(rgb(p.region), corner, size, 0, 0, cv::INTER_AREA);  // in place: same size and type
  } else {
    cv::resize(rgb(p.region), scaled, size, 0, 0, cv::INTER_AREA);
  }
  return scaled;
}

// One DetectMultiScale scan: the passes run and, per pass, the boxes found (image pixels).
class Scan {
 public:
  Scan(const FaceDetector& detector, const cv::Mat& rgb, const MultiScaleOptions& options)
      : detector_(detector), rgb_(rgb), options_(options), traits_(detector.Traits()),
        s_(ScoresFor(traits_, options)) {}

  // Runs the planned passes: the ungated levels' all at once, then each gated level's, finest last.
  absl::Status Run();
  // The scan's faces: merged, confirmed and voted, with the second look where it is on.
  absl::StatusOr<std::vector<FaceBox>> Faces() const;

 private:
  absl::Status RunFrom(size_t begin);  // passes_[begin..]
  absl::Status RunPass(size_t i);
  // Files one pass's boxes (network pixels of an input where p.region is `size`) under pass i.
  void FilePassBoxes(size_t i, const cv::Size& size, bool proposing, const std::vector<FaceBox>& found);
  // Appends a gated level's passes: windows around the proposals of the level above, and every
  // planned tile under a saturated pass; the level's tiles where they are no more.
  void AddGatedLevel(int level);

  const FaceDetector& detector_;
  const cv::Mat& rgb_;
  const MultiScaleOptions& options_;
  const DetectorTraits traits_;
  const ScanScores s_;
  std::vector<DetectionPass> planned_, passes_;
  // Which levels are gated (they run windows around the next coarser level's proposals instead
  // of their tiles) and which propose (LevelRoles).
  std::vector<LevelRole> role_;
  // Per pass, in image pixels: the boxes kept, those that only confirm (support_score up), and
  // (a proposing level's passes) the proposals; `saturated_`: the detector returned its cap of
  // boxes, so proposals may be missing: every planned tile of the finer level under it runs.
  std::vector<std::vector<FaceBox>> kept_, support_, proposals_;
  std::vector<char> saturated_;
};

absl::Status Scan::Run() {
  planned_ = PlanPasses(traits_, rgb_.cols, rgb_.rows, options_);
  role_ = LevelRoles(planned_, options_.gate_tiles ? traits_.proposal_score : 0);
  // The passes run: the ungated levels' planned ones, then each gated level's windows.
  for (const DetectionPass& p : planned_) {
    if (role_[p.level] != LevelRole::kGated) passes_.push_back(p);
  }
  if (absl::Status st = RunFrom(0); !st.ok()) return st;  // the ungated levels, all at once
  for (int level = static_cast<int>(role_.size()) - 1; level >= 0; --level) {
    if (role_[level] != LevelRole::kGated) continue;
    const size_t begin = passes_.size();
    AddGatedLevel(level);
    RETURN_IF_ERROR(RunFrom(begin));
  }
  return absl::OkStatus();
}

absl::Status Scan::RunFrom(size_t begin) {
  kept_.resize(passes_.size()), support_.resize(passes_.size()), proposals_.resize(passes_.size());
  saturated_.resize(passes_.size(), 0);
  auto body = [&](size_t j) { return RunPass(begin + j); };
  if (options_.for_each_pass) return options_.for_each_pass(passes_.size() - begin, body);
  for (size_t j = 0; begin + j < passes_.size(); ++j) {
    RETURN_IF_ERROR(body(j));
  }
  return absl::OkStatus();
}

absl::Status Scan::RunPass(size_t i) {
  const DetectionPass& p = passes_[i];
  if (options_.before_pass) {
    RETURN_IF_ERROR(options_.before_pass(i, passes_.size()));
  }
  cv::Size size;
  const cv::Mat scaled = PassInput(rgb_, p, size);
  const bool proposing = p.fill == 1 && role_[p.level] == LevelRole::kProposes;
  const float detect_score = proposing ? s_.proposal_score : s_.pass_score;
  absl::StatusOr<std::vector<FaceBox>> found = detector_.Detect(scaled, p.input_size, options_.tile_px, detect_score);
  if (!found.ok()) {
    return absl::Status(found.status().code(),
                        absl::StrCat(found.status().message(), " (pass: region ", p.region.x, ",", p.region.y, " ",
                                     p.region.width, "x", p.region.height, " at input ", p.input_size, ")"));
  }
  saturated_[i] = proposing && traits_.max_boxes > 0 && static_cast<int>(found->size()) >= traits_.max_boxes;
  FilePassBoxes(i, size, proposing, *found);
  return absl::OkStatus();
}

void Scan::FilePassBoxes(size_t i, const cv::Size& size, bool proposing, const std::vector<FaceBox>& found) {
  const DetectionPass& p = passes_[i];
  const bool whole = p.region == cv::Rect(0, 0, rgb_.cols, rgb_.rows);
  const float margin = 0.01f * std::max(p.region.width, p.region.height);
  const double kx = static_cast<double>(p.region.width) / size.width, ky = static_cast<double>(p.region.height) / size.height;
  for (const FaceBox& n : found) {
    const FaceBox b{static_cast<float>(p.region.x + n.x * kx), static_cast<float>(p.region.y + n.y * ky),
                    static_cast<float>(n.w * kx), static_cast<float>(n.h * ky), n.score};
    // A proposal: any box up to the widest the finer level keeps (2 * face_max_px there, so
    // face_max_px here), with room for the box's error; no edge rule (the windows decide).
    if (proposing && n.w <= kProposalMaxShare * traits_.face_max_px) proposals_[i].push_back(b);
    if (n.score <= s_.scan_floor) continue;  // a proposal only
    if (n.w < 0.5f * traits_.face_min_px || (!p.coarsest && n.w > 2.0f * traits_.face_max_px)) continue;
    if (!whole && TouchesInnerEdge(b, p.region, rgb_.cols, rgb_.rows, margin)) continue;
    (!s_.with_support || b.score > s_.threshold ? kept_ : support_)[i].push_back(b);  // Detect keeps score > min_score
  }
}

void Scan::AddGatedLevel(int level) {
  std::vector<FaceBox> level_proposals;
  std::vector<cv::Rect> saturated_regions;
  for (size_t i = 0; i < passes_.size(); ++i) {
    if (passes_[i].level == level + 1 && passes_[i].fill == 1) {
      level_proposals.insert(level_proposals.end(), proposals_[i].begin(), proposals_[i].end());
      if (saturated_[i]) saturated_regions.push_back(passes_[i].region);
    }
  }
  const size_t begin = passes_.size();
  const DetectionPass* tile = nullptr;  // the level's first planned tile: its side and scale
  for (const DetectionPass& p : planned_) {
    if (p.level != level) continue;
    if (tile == nullptr) tile = &p;
    bool under = false;
    for (const cv::Rect& r : saturated_regions) under = under || (p.region & r).area() > 0;
    if (under) passes_.push_back(p);
  }
  const int side = std::max(tile->region.width, tile->region.height);
  const std::vector<cv::Rect> windows =
      ProposalWindows(level_proposals, side, static_cast<double>(tile->input_size) / side, rgb_.cols, rgb_.rows);
  size_t tiles = 0;
  for (const DetectionPass& p : planned_) tiles += p.level == level;
  if (windows.size() + (passes_.size() - begin) >= tiles) {  // no cheaper than the tiles: the tiles
    passes_.resize(begin);
    for (const DetectionPass& p : planned_) {
      if (p.level == level) passes_.push_back(p);
    }
  } else {
    for (const cv::Rect& r : windows) {
      DetectionPass p = *tile;
      p.region = r;
      passes_.push_back(p);
    }
  }
}

absl::StatusOr<std::vector<FaceBox>> Scan::Faces() const {
  std::vector<FaceBox> all, weak;
  std::vector<size_t> pass_of, weak_pass_of;  // the pass of each box of `all`, of `weak`
  for (size_t i = 0; i < passes_.size(); ++i) {
    all.insert(all.end(), kept_[i].begin(), kept_[i].end());
    pass_of.insert(pass_of.end(), kept_[i].size(), i);
    weak.insert(weak.end(), support_[i].begin(), support_[i].end());
    weak_pass_of.insert(weak_pass_of.end(), support_[i].size(), i);
  }
  const std::vector<FaceBox> merged = SuppressContained(Nms(all, options_.nms_iou));
  std::vector<FaceBox> found =
      Voted(all, Confirmed(all, pass_of, weak, weak_pass_of, merged, s_.confirm_below), options_.nms_iou);
  if (options_.relook_rolls.empty() || options_.max_relooks <= 0 || !s_.with_support) return found;
  // The second look's pool: the scan's sub-threshold boxes (support) and its weak boxes that no
  // other pass confirmed.
  std::vector<FaceBox> pool = weak;
  for (const FaceBox& m : merged) {
    if (m.score < s_.confirm_below) pool.push_back(m);
  }
  return WithSecondLook(detector_, rgb_, std::move(found), pool, options_, traits_.support_score,
                        std::max(s_.confirm_below, s_.threshold), passes_.size());
}

}  // namespace

absl::StatusOr<DetectorTraits> DetectorTraitsOf(const std::string& model) {
  if (model == "tiny_face_detector") return kTinyFaceDetectorTraits;
  if (model == "ssd_mobilenetv1") return kSsdMobilenetV1Traits;
  return absl::NotFoundError(absl::StrCat("detector '", model, "' has no known traits"));
}

std::vector<DetectionPass> PlanPasses(const DetectorTraits& d, int w, int h, const MultiScaleOptions& o) {
  std::vector<DetectionPass> passes;
  if (w <= 0 || h <= 0 || o.min_face_px <= 0 || d.face_min_px <= 0) return passes;
  double s = std::min<double>(o.max_upscale, static_cast<double>(d.face_min_px) / o.min_face_px);
  const int short_side = std::min(w, h);
  // A face box is at most the short side tall; boxes under face_min_px / 2 network pixels are
  // dropped at every level, and coarser levels only shrink. So a strip thinner than that at
  // the finest level holds no face this scan keeps: no passes (a 100000x1 PNG took 368 passes,
  // 76 s, to find nothing).
  if (short_side * s < 0.5 * d.face_min_px) return passes;
  for (int level = 0;; ++level) {
    PlanLevel(d, w, h, s, level, o, passes);
    const bool whole = passes.back().region == cv::Rect(0, 0, w, h);
    // Done once the level is one pass and a face filling the frame is in the band there, or
    // (fixed input) once the level is the whole image at that input: a coarser level would
    // repeat the pass. Terminates: s halves, and side * s <= 32 puts the short side in the band.
    if (whole && (!d.free_input || short_side * s <= d.face_max_px)) break;
    s /= 2;
  }
  passes.back().coarsest = true;
  if (!d.free_input && d.second_look > 0 && d.second_look < 1) {
    const int level = passes.back().level + 1;
    passes.push_back({cv::Rect(0, 0, w, h), d.fixed_input, level, true, d.second_look});
  }
  return passes;
}

int LargestPassInput(const DetectorTraits& d, int w, int h, const MultiScaleOptions& o) {
  int largest = 0;
  for (const DetectionPass& p : PlanPasses(d, w, h, o)) largest = std::max(largest, p.input_size);
  return largest;
}

absl::StatusOr<std::vector<FaceBox>> DetectMultiScale(const FaceDetector& detector, const cv::Mat& rgb,
                                                      const MultiScaleOptions& options) {
  if (rgb.empty() || rgb.type() != CV_8UC3) return absl::InvalidArgumentError("multiscale: input must be CV_8UC3 RGB");
  if (options.min_face_px <= 0 || !(options.max_upscale > 0) || options.max_input < 416 || options.max_input % 32 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("multiscale: bad options (min_face_px ", options.min_face_px,
                                                   ", max_upscale ", options.max_upscale, ", max_input ",
                                                   options.max_input, ")"));
  }
  Scan scan(detector, rgb, options);
  RETURN_IF_ERROR(scan.Run());
  return scan.Faces();
}

}  // namespace fusion::faceapi
