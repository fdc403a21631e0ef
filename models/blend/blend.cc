// Feathered / Poisson face blending (blend.h).
#include "models/blend/blend.h"

#include <algorithm>
#include <cmath>
#include <opencv2/imgproc.hpp>
#include <opencv2/photo.hpp>

#include "absl/strings/str_cat.h"
#include "models/blend/swap_region.h"

namespace fusion::models {
namespace {

constexpr int kNumLandmarks = 68;
constexpr double kMaxColourGain = 1.25;  // per Lab channel, std ratio target / face
constexpr int kClonePad = 2;  // seamlessClone zeroes the mask's outer pixel; keep the hull inside

// The swap region's hull (swap_region.h: the landmarks and the forehead row above the brows).
std::vector<cv::Point> HullPoints(const std::vector<cv::Point2f>& landmarks) {
  std::vector<cv::Point2f> hull;
  cv::convexHull(SwapRegionPoints(landmarks), hull);
  std::vector<cv::Point> out;
  for (const cv::Point2f& p : hull) out.emplace_back(cvRound(p.x), cvRound(p.y));
  return out;
}

// The crop's change (fused - target), BGR in 0-255 units, sampled on a `size` grid whose pixel
// p sits at crop point out_to_crop * p.
cv::Mat WarpedChange(const BlendInput& in, const cv::Matx23d& out_to_crop, cv::Size size) {
  cv::Mat change_rgb = in.fused_crop - in.target_crop, change;
  cv::cvtColor(change_rgb, change, cv::COLOR_RGB2BGR);
  change *= 255.0;
  cv::Mat out;
  cv::warpAffine(change, out, cv::Mat(out_to_crop), size, cv::INTER_LINEAR | cv::WARP_INVERSE_MAP,
                 cv::BORDER_CONSTANT, cv::Scalar::all(0));
  return out;
}

// The change warped into the frame ROI.
cv::Mat ChangeInRoi(const BlendInput& in, const cv::Rect& roi) {
  cv::Matx23d m = in.frame_to_crop;  // crop = m * (roi_px + roi.tl)
  m(0, 2) += m(0, 0) * roi.x + m(0, 1) * roi.y;
  m(1, 2) += m(1, 0) * roi.x + m(1, 1) * roi.y;
  return WarpedChange(in, m, roi.size());
}

// Feathered weight in [0,1], > 0 only inside the hull: erode by r, blur with support r.
cv::Mat FeatherWeight(const cv::Mat& hull_roi, int r) {
  cv::Mat inner, weight;
  cv::erode(hull_roi, inner, cv::getStructuringElement(cv::MORPH_RECT, cv::Size(2 * r + 1, 2 * r + 1)));
  inner.convertTo(weight, CV_32F, 1.0 / 255.0);
  cv::GaussianBlur(weight, weight, cv::Size(2 * r + 1, 2 * r + 1), r / 2.0, r / 2.0, cv::BORDER_REPLICATE);
  weight.setTo(0.0f, hull_roi == 0);
  return weight;
}

// Matches the face's Lab mean/std to the target's over the hull (both BGR float 0-255).
cv::Mat ColourCorrect(const cv::Mat& face, const cv::Mat& target, const cv::Mat& hull_roi) {
  cv::Mat face_lab, target_lab;
  cv::cvtColor(face / 255.0, face_lab, cv::COLOR_BGR2Lab);
  cv::cvtColor(target / 255.0, target_lab, cv::COLOR_BGR2Lab);
  cv::Scalar mf, sf, mt, st;
  cv::meanStdDev(face_lab, mf, sf, hull_roi);
  cv::meanStdDev(target_lab, mt, st, hull_roi);
  std::vector<cv::Mat> ch;
  cv::split(face_lab, ch);
  for (int c = 0; c < 3; ++c) {
    // The generator already took the target's low frequencies, so this is a touch-up: the L gain
    // is capped to [0.8, 1.25]; chroma is moved toward the target, never amplified (gain <= 1:
    // the generator's chroma is the target's, blurred, so its spread is smaller and a gain > 1
    // would only stretch the blur's residue into coloured spots; a grey source's was 4.5x).
    const double max_gain = c == 0 ? kMaxColourGain : 1.0;
    const double gain = std::clamp(st[c] / std::max(sf[c], 1e-3), 1.0 / kMaxColourGain, max_gain);
    ch[c].convertTo(ch[c], CV_32F, gain, mt[c] - mf[c] * gain);
  }
  cv::Mat merged, bgr;
  cv::merge(ch, merged);
  cv::cvtColor(merged, bgr, cv::COLOR_Lab2BGR);
  return bgr * 255.0;
}

// seamlessClone (OpenCV 4.6) solves on the mask's bounding box with sine transforms done as DFTs
// of length 2 * side - 2 along each row and column, so its cost depends on that length's factors:
// measured on this machine at one thread, a 159-px box (length 316 = 4 * 79) took 37-48 ms, 161
// px (320) 11.5 ms, 129 px (256) 6 ms. The smallest side >= `side` whose length has no prime
// factor over 5 (cv::getOptimalDFTSize's sizes).
int FastCloneSide(int side) {
  if (side < 3) return side;
  int s = side;
  while (cv::getOptimalDFTSize(2 * s - 2) != 2 * s - 2) ++s;
  return s;
}

// `face` cloned onto `target8` over `hull_roi` (all ROI-sized; face float 0-255, rounded to 8 bits
// as seamlessClone takes it). The hull's box is widened to a FastCloneSide box by one extra mask
// pixel at the widened box's top-left corner, in the zero margin added here: seamlessClone erodes
// its mask (3x3, three times) before it builds the guidance field, so that lone pixel changes
// only the box the solver runs on, whose Dirichlet border then sits a few pixels further out.
cv::Mat PoissonClone(const cv::Mat& face, const cv::Mat& target8, const cv::Mat& hull_roi) {
  const cv::Rect hb = cv::boundingRect(hull_roi);
  const int gx = FastCloneSide(hb.width) - hb.width, gy = FastCloneSide(hb.height) - hb.height;
  const int left = kClonePad + gx, top = kClonePad + gy;
  cv::Mat face8, src, dst, mask, cloned;
  face.convertTo(face8, CV_8U);
  cv::copyMakeBorder(face8, src, top, kClonePad, left, kClonePad, cv::BORDER_REPLICATE);
  cv::copyMakeBorder(target8, dst, top, kClonePad, left, kClonePad, cv::BORDER_REPLICATE);
  cv::copyMakeBorder(hull_roi, mask, top, kClonePad, left, kClonePad, cv::BORDER_CONSTANT, 0);
  if (!hb.empty()) mask.at<uchar>(hb.y + kClonePad, hb.x + kClonePad) = 255;
  const cv::Rect b = cv::boundingRect(mask);
  // With src and dst aligned, this centre maps the mask onto itself (OpenCV 4.6 seamlessClone).
  cv::seamlessClone(src, dst, mask, cv::Point(b.x + b.width / 2, b.y + b.height / 2), cloned,
                    cv::NORMAL_CLONE);
  cv::Mat out;
  cloned(cv::Rect(left, top, target8.cols, target8.rows)).convertTo(out, CV_32F);
  return out;
}

// Whether the Lab colour (OpenCV's float Lab: D65, L in [0, 100]) is inside the sRGB gamut, with
// 1/512 of slack for round-off: its linear RGB (the inverse of CIE Lab, then the sRGB matrix) in
// [0, 1]. OpenCV's Lab2BGR clips to [0, 1] per channel instead, which drops chroma.
bool InSrgbGamut(float l, float a, float b) {
  const float fy = (l + 16.0f) / 116.0f, fx = fy + a / 500.0f, fz = fy - b / 200.0f;
  auto inv = [](float f) { return f > 0.206893f ? f * f * f : (f - 16.0f / 116.0f) / 7.787f; };
  const float x = 0.950456f * inv(fx), y = inv(fy), z = 1.088754f * inv(fz);
  const float rgb[3] = {3.2404542f * x - 1.5371385f * y - 0.4985314f * z,
                        -0.9692660f * x + 1.8760108f * y + 0.0415560f * z,
                        0.0556434f * x - 0.2040259f * y + 1.0572252f * z};
  constexpr float kSlack = 1.0f / 512;
  for (float c : rgb) {
    if (c < -kSlack || c > 1.0f + kSlack) return false;
  }
  return true;
}

// Lab L of `cloned` with the (a, b) of `face` (both BGR, float, 0-255 units): the Poisson
// membrane moves lightness only. The generator already gave the face the target's chroma
// (blurred), so the membrane's chroma would only spread a colour difference at the hull's edge
// (a brow, a hairline, a saturated warm skin clipped at 255) into the face; on the warm-light
// photos it made faces 5-15% blotched once the hull reached above the brows (bench/quality).
// Where the clone's lightness at the face's (a, b) is outside the sRGB gamut, the lightness
// change is scaled down (per pixel, bisection to 1/128) until it fits, as the generator's
// gamut fit does: a brightened orange glasses rim keeps its orange instead of being clipped
// toward white (the astronaut onto Grace: 5.0% -> 0.0% of the face blotched, p99.5 25 -> 10).
cv::Mat KeepChroma(const cv::Mat& cloned, const cv::Mat& face) {
  cv::Mat cl, fl;
  cv::cvtColor(cv::min(cv::max(cloned, 0.0), 255.0) / 255.0, cl, cv::COLOR_BGR2Lab);
  cv::cvtColor(cv::min(cv::max(face, 0.0), 255.0) / 255.0, fl, cv::COLOR_BGR2Lab);
  for (int y = 0; y < fl.rows; ++y) {
    const cv::Vec3f* c = cl.ptr<cv::Vec3f>(y);
    cv::Vec3f* f = fl.ptr<cv::Vec3f>(y);
    for (int x = 0; x < fl.cols; ++x) {
      const float from = f[x][0], to = c[x][0];
      if (InSrgbGamut(to, f[x][1], f[x][2]) || !InSrgbGamut(from, f[x][1], f[x][2])) {
        f[x][0] = to;
        continue;
      }
      float lo = 0.0f, hi = 1.0f;
      for (int i = 0; i < 7; ++i) {
        const float mid = 0.5f * (lo + hi);
        (InSrgbGamut(from + mid * (to - from), f[x][1], f[x][2]) ? lo : hi) = mid;
      }
      f[x][0] = from + lo * (to - from);
    }
  }
  cv::Mat bgr;
  cv::cvtColor(fl, bgr, cv::COLOR_Lab2BGR);
  return bgr * 255.0;
}

// The Poisson correction of `face` over the hull: PoissonClone(face) - face, the membrane that
// takes the face's boundary to the target's (smooth inside the hull: a harmonic function, so
// it is solved at reduced resolution, Farbman et al. 2009 "Coordinates for instant image
// cloning" make the same point). A hull ROI larger than `max_side` px is solved scaled
// down to that side and the membrane upsampled (bilinear); minus the solver's own bias (the
// target cloned onto itself at the same scale), so an unchanged face gets a zero correction.
cv::Mat PoissonCorrection(const cv::Mat& face, const cv::Mat& target, const cv::Mat& target8, const cv::Mat& hull_roi,
                          int max_side) {
  const int side = std::max(hull_roi.cols, hull_roi.rows);
  if (side <= max_side) return PoissonClone(face, target8, hull_roi) - PoissonClone(target, target8, hull_roi);
  const double s = static_cast<double>(max_side) / side;
  const cv::Size small(std::max(1, static_cast<int>(std::lround(hull_roi.cols * s))),
                       std::max(1, static_cast<int>(std::lround(hull_roi.rows * s))));
  // The face in 8-bit levels, as the full-size solve sees it (PoissonClone rounds its source):
  // float round-off of an unchanged face (the colour correction's Lab round trip, < 0.52 levels)
  // must not become a membrane.
  cv::Mat face8, f, t, t8, m;
  face.convertTo(face8, CV_8U);
  face8.convertTo(face8, CV_32F);
  cv::resize(face8, f, small, 0, 0, cv::INTER_AREA);
  cv::resize(target, t, small, 0, 0, cv::INTER_AREA);
  t.convertTo(t8, CV_8U);
  cv::resize(hull_roi, m, small, 0, 0, cv::INTER_NEAREST);
  cv::Mat membrane = (PoissonClone(f, t8, m) - f) - (PoissonClone(t, t8, m) - t), up;
  cv::resize(membrane, up, hull_roi.size(), 0, 0, cv::INTER_LINEAR);
  return face8 - target + up;
}


// Full mode on a hull ROI wider or taller than kMaxFullModeSide px: the colour correction and the
// Poisson membrane are smooth or near-smooth corrections of the face, so they are computed on a
// copy scaled to that side (the target INTER_AREA-reduced, the crop's change warped straight to
// the small grid) and their sum, blended - face, upsampled (bilinear) to the ROI. What is lost is
// the colour gain's effect on detail finer than the reduced grid (the gain is within [0.8, 1.25]);
// the face's own detail is the crop's change, warped at full size. The feather weight, a blur with
// support r of the hull eroded by r, is as smooth: it is made on the small grid with r scaled (r
// grows with the face: ~10 px on the small grid at the default feather_fraction) from the
// full-size hull's coverage of each small pixel, upsampled and cut to the full-size hull (within
// 0.034 of the full-size weight on a 1113-px face; FeatherWeight took 14-20 ms of that face's
// blend at full size). Measured on Grace x3 (a 547-px face, the astronaut as source), the
// result at side 384 is within 11 levels of the one at 512 (p99.9 5, mean 0.26) and of the
// full-size blend's (p99.9 3, mean 0.23); bench/quality's identity and blotch figures on the
// Grace set are unchanged. Side 512 -> 384 took a 1113-px face's blend 117 -> 80 ms.
constexpr int kMaxFullModeSide = 384;

struct ReducedFullMode {
  cv::Mat delta;   // CV_32FC3, ROI-sized, 0-255 units: blended - (target + change)
  cv::Mat weight;  // CV_32F, ROI-sized, in [0, 1], 0 outside the hull
};

ReducedFullMode ReducedFullModeBlend(const BlendInput& in, const BlendOptions& options, const cv::Rect& roi,
                                     const cv::Mat& target8, const cv::Mat& hull_roi, int r) {
  const double s = static_cast<double>(kMaxFullModeSide) / std::max(roi.width, roi.height);
  const cv::Size small(std::max(1, static_cast<int>(std::lround(roi.width * s))),
                       std::max(1, static_cast<int>(std::lround(roi.height * s))));
  const double sx = static_cast<double>(small.width) / roi.width, sy = static_cast<double>(small.height) / roi.height;
  // Small pixel (u, v) has its centre at frame ((u + 0.5) / sx - 0.5 + roi.x, ...) (cv::resize's
  // convention), so crop = frame_to_crop * that point.
  const cv::Matx23d& m = in.frame_to_crop;
  const double ox = 0.5 / sx - 0.5 + roi.x, oy = 0.5 / sy - 0.5 + roi.y;
  const cv::Matx23d ms(m(0, 0) / sx, m(0, 1) / sy, m(0, 0) * ox + m(0, 1) * oy + m(0, 2),
                       m(1, 0) / sx, m(1, 1) / sy, m(1, 0) * ox + m(1, 1) * oy + m(1, 2));
  const cv::Mat change = WarpedChange(in, ms, small);
  cv::Mat t8, t;
  cv::resize(target8, t8, small, 0, 0, cv::INTER_AREA);
  t8.convertTo(t, CV_32F);
  std::vector<cv::Point2f> lm = in.landmarks;
  for (cv::Point2f& p : lm) {
    p = cv::Point2f(static_cast<float>((p.x - roi.x + 0.5) * sx - 0.5), static_cast<float>((p.y - roi.y + 0.5) * sy - 0.5));
  }
  const cv::Mat hull = FaceHullMask(lm, small);
  const cv::Mat face = t + change;
  const cv::Mat corrected = options.colour_correction ? ColourCorrect(face, t, hull) : face;
  const cv::Mat delta_small = KeepChroma(t + PoissonCorrection(corrected, t, t8, hull, options.poisson_side), corrected) - t - change;
  ReducedFullMode out;
  cv::resize(delta_small, out.delta, roi.size(), 0, 0, cv::INTER_LINEAR);
  // The full-size hull's coverage of each small pixel (its edge to a fraction of a small pixel,
  // where `hull`'s rounded vertices are a pixel off), in a zero margin as the full-size one sits
  // in FaceHullRegion's.
  const int rs = std::max(1, static_cast<int>(std::lround(r * std::min(sx, sy))));
  cv::Mat coverage, padded;
  cv::resize(hull_roi, coverage, small, 0, 0, cv::INTER_AREA);
  cv::copyMakeBorder(coverage, padded, rs, rs, rs, rs, cv::BORDER_CONSTANT, 0);
  const cv::Mat weight_small = FeatherWeight(padded, rs)(cv::Rect(rs, rs, small.width, small.height));
  cv::resize(weight_small, out.weight, roi.size(), 0, 0, cv::INTER_LINEAR);
  out.weight.setTo(0.0f, hull_roi == 0);
  return out;
}

}  // namespace

cv::Mat FaceHullMask(const std::vector<cv::Point2f>& landmarks, cv::Size frame_size) {
  cv::Mat mask = cv::Mat::zeros(frame_size, CV_8U);
  if (landmarks.size() >= 3) cv::fillConvexPoly(mask, HullPoints(landmarks), cv::Scalar(255), cv::LINE_8);
  return mask;
}

HullRegion FaceHullRegion(const std::vector<cv::Point2f>& landmarks, cv::Size frame_size, int margin) {
  HullRegion r;
  if (landmarks.size() < 3) return r;
  std::vector<cv::Point> hull = HullPoints(landmarks);
  const cv::Rect frame(cv::Point(0, 0), frame_size);
  // The fill covers at most the vertices' box (LINE_8 fills between the rounded vertices).
  const cv::Rect box = cv::boundingRect(hull);
  r.ext = cv::Rect(box.x - margin, box.y - margin, box.width + 2 * margin, box.height + 2 * margin) & frame;
  if (r.ext.empty()) return r;
  r.mask = cv::Mat::zeros(r.ext.size(), CV_8U);
  for (cv::Point& p : hull) p -= r.ext.tl();  // integer shift: the same pixels as in the frame
  cv::fillConvexPoly(r.mask, hull, cv::Scalar(255), cv::LINE_8);
  r.roi = cv::boundingRect(r.mask) + r.ext.tl();
  if (r.roi.empty()) r.roi = cv::Rect();
  return r;
}

int FeatherRadiusPx(const std::vector<cv::Point2f>& landmarks, const BlendOptions& options) {
  const double area = landmarks.size() >= 3 ? cv::contourArea(HullPoints(landmarks)) : 0.0;
  return std::max(1, static_cast<int>(std::lround(options.feather_fraction * std::sqrt(area))));
}

absl::Status ValidateBlendInput(const BlendInput& in, const cv::Mat* frame) {
  if (frame == nullptr || frame->type() != CV_8UC3 || frame->empty()) {
    return absl::InvalidArgumentError("blend: frame must be a non-empty CV_8UC3 image");
  }
  if (in.fused_crop.type() != CV_32FC3 || in.target_crop.type() != CV_32FC3 ||
      in.fused_crop.size() != in.target_crop.size() || in.fused_crop.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "blend: fused_crop and target_crop must be CV_32FC3 of one size, got types ",
        in.fused_crop.type(), "/", in.target_crop.type(), " sizes ", in.fused_crop.cols, "x",
        in.fused_crop.rows, "/", in.target_crop.cols, "x", in.target_crop.rows));
  }
  if (in.landmarks.size() != kNumLandmarks) {
    return absl::InvalidArgumentError(absl::StrCat("blend: need 68 landmarks, got ", in.landmarks.size()));
  }
  return absl::OkStatus();
}

// target8 = round(t + w * (b - t)) where w > 0 (saturated; pixels with w = 0 keep their bytes),
// t = target8 as float, b = `blended` when given, else (t + change) (+ delta when given): the
// float operations of the Mat expressions this replaced, pixel by pixel, with no ROI-sized
// float temporaries (a 1113-px face had seven of 16 MB each, fresh pages every call: the page
// faults were a sixth of fusion_bench's time). All inputs are ROI-sized (weight CV_32F, the rest
// CV_32FC3).
void Composite(const cv::Mat& weight, const cv::Mat& change, const cv::Mat* delta, const cv::Mat* blended,
               cv::Mat& target8) {
  for (int y = 0; y < target8.rows; ++y) {
    uchar* t = target8.ptr<uchar>(y);
    const float* w = weight.ptr<float>(y);
    const cv::Vec3f* c = change.ptr<cv::Vec3f>(y);
    const cv::Vec3f* d = delta != nullptr ? delta->ptr<cv::Vec3f>(y) : nullptr;
    const cv::Vec3f* b = blended != nullptr ? blended->ptr<cv::Vec3f>(y) : nullptr;
    for (int x = 0; x < target8.cols; ++x) {
      if (!(w[x] > 0.0f)) continue;
      for (int k = 0; k < 3; ++k) {
        const float tv = t[3 * x + k];
        float bv;
        if (b != nullptr) {
          bv = b[x][k];
        } else {
          bv = tv + c[x][k];
          if (d != nullptr) bv = bv + d[x][k];
        }
        t[3 * x + k] = cv::saturate_cast<uchar>(tv + w[x] * (bv - tv));
      }
    }
  }
}

void PrepareBlend() {
  const cv::Mat grey(1, 1, CV_32FC3, cv::Scalar::all(0.5));
  cv::Mat lab, bgr;
  cv::cvtColor(grey, lab, cv::COLOR_BGR2Lab);
  cv::cvtColor(lab, bgr, cv::COLOR_Lab2BGR);
}

absl::Status BlendFace(const BlendInput& in, const BlendOptions& options, cv::Mat* frame_bgr) {
  if (auto s = ValidateBlendInput(in, frame_bgr); !s.ok()) return s;
  cv::Mat& frame = *frame_bgr;
  const int r = FeatherRadiusPx(in.landmarks, options);
  const HullRegion hull = FaceHullRegion(in.landmarks, frame.size(), r);
  const cv::Rect roi = hull.roi;
  if (roi.empty()) return absl::OkStatus();  // hull entirely outside the frame
  try {
    const cv::Mat hull_roi = hull.RoiView();
    cv::Mat target8 = frame(roi);
    const cv::Mat change = ChangeInRoi(in, roi);
    if (options.mode == BlendMode::kFull && std::max(roi.width, roi.height) > kMaxFullModeSide) {
      const ReducedFullMode reduced = ReducedFullModeBlend(in, options, roi, target8, hull_roi, r);
      Composite(reduced.weight, change, &reduced.delta, nullptr, target8);
      return absl::OkStatus();
    }
    const cv::Mat weight = FeatherWeight(hull_roi, r);
    if (options.mode == BlendMode::kFull) {
      // seamlessClone is biased (an unchanged source comes back up to 1-2 levels off), so the
      // target cloned onto itself is subtracted: an unchanged face then yields exactly zero.
      cv::Mat target;
      target8.convertTo(target, CV_32F);
      const cv::Mat face = target + change;
      const cv::Mat corrected = options.colour_correction ? ColourCorrect(face, target, hull_roi) : face;
      const cv::Mat blended = KeepChroma(target + PoissonCorrection(corrected, target, target8, hull_roi, options.poisson_side),
                                           corrected);
      Composite(weight, change, nullptr, &blended, target8);
    } else {
      Composite(weight, change, nullptr, nullptr, target8);
    }
    return absl::OkStatus();
  } catch (const cv::Exception& e) {
    return absl::InternalError(absl::StrCat("blend (", options.mode == BlendMode::kFull ? "full" : "simple",
                                            ") on ", roi.width, "x", roi.height, " region: ", e.what()));
  }
}

}  // namespace fusion::models
