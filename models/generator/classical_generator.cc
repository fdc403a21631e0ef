// Classical fusion generator: host geometry (Delaunay, triangle-id raster) + device tensor ops
// (piecewise-affine grid_sample, Lab colour transfer, ratio). See classical_generator.h.
#include "models/generator/classical_generator.h"

#include <ATen/ATen.h>

#include <array>
#include <algorithm>
#include <cmath>
#include <opencv2/imgproc.hpp>
#include <vector>

#include "models/blend/swap_region.h"
#include "models/common/exception_text.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace fusion::models {
namespace {

using Triangle = std::array<int, 3>;

std::vector<cv::Point2f> ToPoints(const at::Tensor& landmarks) {
  at::Tensor cpu = landmarks.detach().to(at::kCPU).contiguous();
  const float* p = cpu.data_ptr<float>();
  std::vector<cv::Point2f> pts(kNumLandmarks);
  for (int i = 0; i < kNumLandmarks; ++i) pts[i] = {p[2 * i], p[2 * i + 1]};
  return pts;
}

// Delaunay triangles of `pts` as landmark indices. Subdiv2D needs every point inside its rect, so
// points must lie within two crop sides of the crop (anything further is not a face in the crop).
absl::StatusOr<std::vector<Triangle>> Delaunay(const std::vector<cv::Point2f>& pts, int size) {
  const cv::Rect rect(-2 * size, -2 * size, 5 * size, 5 * size);
  cv::Subdiv2D subdiv(rect);
  for (size_t i = 0; i < pts.size(); ++i) {
    if (!std::isfinite(pts[i].x) || !std::isfinite(pts[i].y) || !rect.contains(pts[i])) {
      return absl::InvalidArgumentError(absl::StrCat("target landmark ", i, " (", pts[i].x, ",",
                                                     pts[i].y, ") is outside the crop's range"));
    }
    subdiv.insert(pts[i]);
  }
  std::vector<cv::Vec6f> list;
  subdiv.getTriangleList(list);
  auto index_of = [&](float x, float y) {
    for (size_t i = 0; i < pts.size(); ++i) {
      if (pts[i].x == x && pts[i].y == y) return static_cast<int>(i);
    }
    return -1;  // one of Subdiv2D's virtual outer vertices
  };
  std::vector<Triangle> tris;
  for (const cv::Vec6f& t : list) {
    Triangle tri{index_of(t[0], t[1]), index_of(t[2], t[3]), index_of(t[4], t[5])};
    if (tri[0] >= 0 && tri[1] >= 0 && tri[2] >= 0) tris.push_back(tri);
  }
  return tris;
}

double Area2(const cv::Point2f& a, const cv::Point2f& b, const cv::Point2f& c) {
  return std::abs((b.x - a.x) * (c.y - a.y) - (b.y - a.y) * (c.x - a.x));
}

// The 68-point scheme's left-right mirror (iBUG 300-W order): jaw 0-16, brows 17-26, nose
// 27-35, eyes 36-47, mouth 48-67.
constexpr std::array<int, kNumLandmarks> kMirror = {
    16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0,  // jaw
    26, 25, 24, 23, 22, 21, 20, 19, 18, 17,                    // brows
    27, 28, 29, 30, 35, 34, 33, 32, 31,                        // nose
    45, 44, 43, 42, 47, 46, 39, 38, 37, 36, 41, 40,            // eyes
    54, 53, 52, 51, 50, 49, 48, 59, 58, 57, 56, 55,            // outer lip
    64, 63, 62, 61, 60, 67, 66, 65};                           // inner lip

// The mirror of a swap-region point (swap_region.h: the 68 landmarks, then the forehead row).
int MirrorOf(int i) { return i < kNumLandmarks ? kMirror[i] : MirrorForeheadPoint(i); }

// The output's weight over the forehead strip of `region` (SwapRegionPoints' 78 points),
// [1,1,S,S] float32: 1 inside the 68 points' hull (brows and below), falling linearly with the
// distance from that hull to 0 at the forehead row's depth above the brows. The strip is there so the
// blend's feather lies above the brows rather than across them; pasted at full weight it showed
// the source's own forehead (the astronaut's bright skin under her fringe, 1.5x detail) as a pale
// band with a hard top edge across the target's forehead (looked at on bench/quality's sheet).
// Measured (bench/quality, group photos and casts): identity 0.464 -> 0.473 mean for the
// astronaut, 0.505 -> 0.509 for the profile source (32 of 32 under 0.6 kept), no band.
at::Tensor ForeheadRamp(const std::vector<cv::Point2f>& region, int size, const at::TensorOptions& options) {
  std::vector<cv::Point2f> hull;
  cv::convexHull(std::vector<cv::Point2f>(region.begin(), region.begin() + kNumLandmarks), hull);
  std::vector<cv::Point> poly;
  for (const cv::Point2f& p : hull) poly.emplace_back(cvRound(p.x), cvRound(p.y));
  cv::Mat outside(size, size, CV_8U, cv::Scalar(255)), dist;
  cv::fillConvexPoly(outside, poly, cv::Scalar(0), cv::LINE_8);
  cv::distanceTransform(outside, dist, cv::DIST_L2, cv::DIST_MASK_PRECISE);  // px to the hull
  // The strip's depth: the forehead row's offset from its brow point (the same for every point).
  const double strip = std::max(1.0, cv::norm(region[kNumLandmarks] - region[17]));
  cv::Mat ramp = 1.0 - dist / strip;
  cv::max(ramp, 0.0, ramp);
  return at::from_blob(ramp.data, {1, 1, size, size}, at::kFloat).clone().to(options.device(), options.dtype());
}

// One side of the face in the 68-point scheme: the landmarks left of the midline in the image
// of a frontal face (the subject's right), and the midline itself.
constexpr std::array<int, 29> kLeftSide = {0,  1,  2,  3,  4,  5,  6,  7,  17, 18, 19, 20, 21, 31, 32,
                                           36, 37, 38, 39, 40, 41, 48, 49, 50, 58, 59, 60, 61, 67};
constexpr std::array<int, 10> kMidline = {8, 27, 28, 29, 30, 33, 51, 57, 62, 66};

// When the source face is turned, one half is foreshortened (and partly hidden): a warp
// stretches it into smears. Faces are near-symmetric, so the visible half stands in for the
// hidden one ("soft symmetry", Hassner et al. 2015, Effective face frontalization): the target's
// pixels on the foreshortened side's half, up to its midline, sample the mirror of the other
// half (HalfMask; before, only whole triangles on that side did, so the triangles across the
// midline - between the eyes, the nose, the lips - sampled the hidden half's squeezed texture and
// whatever lay beside it, a camera's edge on the profile source). A side is
// foreshortened when its hull (with the midline) has under 1/kMirrorRatio of the other's
// area; a frontal face (ratio 1.0-1.3 on the test photos) never is.
constexpr double kMirrorRatio = 2.0;

double HullArea(const std::vector<cv::Point2f>& pts, bool left) {
  std::vector<cv::Point2f> side, hull;
  for (int i : kLeftSide) side.push_back(pts[left ? i : kMirror[i]]);
  for (int i : kMidline) side.push_back(pts[i]);
  cv::convexHull(side, hull);
  return cv::contourArea(hull);
}

// Which source side to replace by its mirror: -1 none, 0 the left side, 1 the right side.
int ForeshortenedSide(const std::vector<cv::Point2f>& src) {
  const double left = HullArea(src, true), right = HullArea(src, false);
  if (right > kMirrorRatio * left) return 0;
  if (left > kMirrorRatio * right) return 1;
  return -1;
}

// Rasterises each target triangle's id+1 (0 = not covered) into `ids` (when given) and returns the
// per-triangle target->source affines as [T+1,2,3] float32 (row 0 unused, zeros). With `mirror`,
// target point i maps to source point kMirror[i]: the warp of the source's mirror image (the
// reflection is in each triangle's affine; no image is flipped).
at::Tensor RasteriseAffines(const std::vector<Triangle>& tris, const std::vector<cv::Point2f>& src,
                            const std::vector<cv::Point2f>& dst, int size, bool mirror, cv::Mat* ids) {
  if (ids != nullptr) *ids = cv::Mat::zeros(size, size, CV_16U);
  std::vector<float> affines(6, 0.0f);
  constexpr int kShift = 4;  // sub-pixel vertex precision for fillConvexPoly
  for (const Triangle& t : tris) {
    std::array<cv::Point2f, 3> d{dst[t[0]], dst[t[1]], dst[t[2]]};
    std::array<cv::Point2f, 3> s;
    for (int k = 0; k < 3; ++k) s[k] = src[mirror ? MirrorOf(t[k]) : t[k]];
    if (Area2(d[0], d[1], d[2]) < 1e-3) continue;  // degenerate: no affine
    const cv::Mat a = cv::getAffineTransform(d.data(), s.data());
    for (int k = 0; k < 6; ++k) affines.push_back(static_cast<float>(a.at<double>(k / 3, k % 3)));
    if (ids == nullptr) continue;
    std::array<cv::Point, 3> poly;
    for (int k = 0; k < 3; ++k) {
      poly[k] = cv::Point(cvRound(d[k].x * (1 << kShift)), cvRound(d[k].y * (1 << kShift)));
    }
    const int id = static_cast<int>(affines.size() / 6) - 1;
    cv::fillConvexPoly(*ids, poly.data(), 3, cv::Scalar(id), cv::LINE_8, kShift);
  }
  const int64_t n = static_cast<int64_t>(affines.size() / 6);
  return at::from_blob(affines.data(), {n, 2, 3}, at::kFloat).clone();
}

// The target crop's `side` half of the face (0: where the kLeftSide points lie, 1: the other),
// split at the midline polyline (nose bridge, nose, lips, chin: 27-30, 33, 51, 62, 66, 57, 8,
// extended past 27 and 8), feathered by a Gaussian of kSeamSigma * size: [S,S] float32 in [0, 1].
constexpr double kSeamSigma = 0.015;
constexpr std::array<int, 10> kMidlineTopDown = {27, 28, 29, 30, 33, 51, 62, 66, 57, 8};

cv::Mat HalfMask(const std::vector<cv::Point2f>& dst, int side, int size) {
  auto unit = [](cv::Point2f d) {
    const float l = std::hypot(d.x, d.y);
    return l > 1e-6f ? d * (1.0f / l) : cv::Point2f(0, 0);
  };
  cv::Point2f mid(0, 0), half(0, 0);
  for (int i : kMidlineTopDown) mid += dst[i];
  mid *= 1.0f / kMidlineTopDown.size();
  for (int i : kLeftSide) half += dst[side == 0 ? i : kMirror[i]];
  half *= 1.0f / kLeftSide.size();
  const float far = 4.0f * size;
  const cv::Point2f away = unit(half - mid) * far;  // toward that half
  std::vector<cv::Point2f> poly;
  poly.push_back(dst[27] + unit(dst[27] - dst[30]) * far);
  for (int i : kMidlineTopDown) poly.push_back(dst[i]);
  poly.push_back(dst[8] + unit(dst[8] - dst[57]) * far);
  poly.push_back(poly.back() + away);
  poly.push_back(poly.front() + away);
  constexpr int kShift = 4;
  std::vector<cv::Point> fixed;
  for (const cv::Point2f& p : poly) fixed.emplace_back(cvRound(p.x * (1 << kShift)), cvRound(p.y * (1 << kShift)));
  cv::Mat mask = cv::Mat::zeros(size, size, CV_32F);
  cv::fillPoly(mask, std::vector<std::vector<cv::Point>>{fixed}, cv::Scalar(1.0), cv::LINE_8, kShift);
  const double sigma = kSeamSigma * size;
  cv::GaussianBlur(mask, mask, cv::Size(0, 0), sigma, sigma, cv::BORDER_REPLICATE);
  return mask;
}

// Samples `source` [1,3,S,S] through the per-pixel affine of its triangle (ids: S x S CV_16U,
// 0 = uncovered) on the source's device. Returns the warp and the coverage [1,1,S,S] (0/1).
std::pair<at::Tensor, at::Tensor> PiecewiseAffineWarp(const at::Tensor& source, const at::Tensor& affines,
                                                      const cv::Mat& ids) {
  const int64_t size = ids.rows;
  const at::Tensor id = at::from_blob(ids.data, {size * size}, at::kShort).to(source.device(), at::kLong);
  const at::Tensor a = affines.to(source.device()).index_select(0, id);  // [P,2,3]
  const at::Tensor ramp = at::arange(size, source.options());
  const at::Tensor xs = ramp.view({1, size}).expand({size, size}).reshape({-1});
  const at::Tensor ys = ramp.view({size, 1}).expand({size, size}).reshape({-1});
  const at::Tensor row0 = a.select(1, 0), row1 = a.select(1, 1);
  const at::Tensor sx = row0.select(1, 0) * xs + row0.select(1, 1) * ys + row0.select(1, 2);
  const at::Tensor sy = row1.select(1, 0) * xs + row1.select(1, 1) * ys + row1.select(1, 2);
  // align_corners=true: -1 and +1 are the centres of pixels 0 and S-1.
  const at::Tensor grid = (at::stack({sx, sy}, 1) * (2.0 / (size - 1)) - 1.0).view({1, size, size, 2});
  const at::Tensor warped = at::grid_sampler(source.contiguous(), grid, /*bilinear*/ 0,
                                             /*border*/ 1, /*align_corners=*/true);
  return {warped, id.gt(0).to(source.scalar_type()).view({1, 1, size, size})};
}

// Per-pixel 3x3 colour matrix on [N,3,H,W] (a matmul: conv2d 1x1 takes a slow BLAS path on CPU).
at::Tensor Mix(const at::Tensor& x, const std::array<float, 9>& m) {
  const at::Tensor w = at::tensor(at::ArrayRef<float>(m.data(), 9), x.options()).view({3, 3});
  return at::matmul(w, x.reshape({x.size(0), 3, -1})).view(x.sizes());
}

at::Tensor WhitePoint(const at::Tensor& like) {
  return at::tensor({0.95047f, 1.0f, 1.08883f}, like.options()).view({1, 3, 1, 1});
}

// Separable Gaussian blur of [1,C,H,W] (sigma in pixels, replicate border): rows, then columns,
// taps exp(-t^2 / (2 sigma^2)) normalised, t in [-r, r], r = ceil(3 sigma). On the CPU with
// cv::sepFilter2D (the same taps, border and order; SIMD rows: 12x less time than at::conv2d's
// depthwise path with a 125-tap kernel, which dominated the generator), elsewhere as two
// depthwise convolutions over the replicate-padded input. Same values up to float summation order.
at::Tensor Blur(const at::Tensor& x, double sigma) {
  const int64_t r = static_cast<int64_t>(std::ceil(3 * sigma)), k = 2 * r + 1;
  const at::Tensor t = at::arange(-r, r + 1, x.options());
  at::Tensor g = at::exp(t * t * (-0.5 / (sigma * sigma)));
  g = g / g.sum();
  const int64_t c = x.size(1);
  if (x.device().is_cpu() && x.scalar_type() == at::kFloat && x.size(0) == 1) {
    const at::Tensor in = x.contiguous();
    const at::Tensor taps = g.contiguous();
    at::Tensor out = at::empty_like(in, at::MemoryFormat::Contiguous);
    const int h = static_cast<int>(in.size(2)), w = static_cast<int>(in.size(3));
    const cv::Mat kernel(1, static_cast<int>(k), CV_32F, const_cast<float*>(taps.data_ptr<float>()));
    for (int64_t ch = 0; ch < c; ++ch) {
      const cv::Mat src(h, w, CV_32F, const_cast<float*>(in[0][ch].data_ptr<float>()));
      cv::Mat dst(h, w, CV_32F, out[0][ch].data_ptr<float>());  // written in place: no OpenCV image
      cv::sepFilter2D(src, dst, CV_32F, kernel, kernel, cv::Point(-1, -1), 0, cv::BORDER_REPLICATE);
    }
    return out;
  }
  auto depthwise = [c](const at::Tensor& in, const at::Tensor& taps) {  // one filter per channel
    const int64_t one[2] = {1, 1}, zero[2] = {0, 0};  // stride, padding, dilation
    return at::conv2d(in, taps.expand({c, 1, taps.size(2), taps.size(3)}).contiguous(), c10::nullopt, one,
                      zero, one, /*groups=*/c);
  };
  return depthwise(depthwise(at::replication_pad2d(x, {r, r, r, r}), g.view({1, 1, 1, k})), g.view({1, 1, k, 1}));
}

// The low-pass side of the colour transfer. Its blurs are wide (sigma 10-20 px on a 256 crop)
// and their results smooth at that scale, so they run on the crop box-averaged by `factor` (a
// power of two keeping sigma / factor >= kMinLowSigma px) and are upsampled back bilinearly:
// 1/8 of the blurs' work per halving, and the target's Lab converted on a quarter of the pixels
// (it only ever enters blurred). On the test photos the fused crop moves by at most a few
// levels in 8 bits against the full-resolution blurs (Options::reduced_low_pass).
constexpr double kMinLowSigma = 4.0;

int LowPassFactor(double sigma, int size) {
  int f = 1;
  while (sigma / (2 * f) >= kMinLowSigma && size / (2 * f) >= kMinCropSize) f *= 2;
  return f;
}

at::Tensor Down(const at::Tensor& x, int factor) {
  if (factor == 1) return x;
  return at::adaptive_avg_pool2d(x, {x.size(2) / factor, x.size(3) / factor});
}

at::Tensor Up(const at::Tensor& x, int size) {
  if (x.size(2) == size && x.size(3) == size) return x;
  return at::upsample_bilinear2d(x, {size, size}, /*align_corners=*/false);
}

// Blur of x over the pixels where cov == 1 only (normalised convolution): what is outside the
// warp's coverage does not bleed in. Inputs and result at one (reduced) resolution; `norm` =
// Blur(cov, sigma) there, shared by the blurs at one sigma.
at::Tensor MaskedBlur(const at::Tensor& x, const at::Tensor& cov, const at::Tensor& norm, double sigma) {
  return Blur(x * cov, sigma) / norm;
}

// Linear sRGB of CIE Lab (D65), unclamped: a channel outside [0, 1] is outside the gamut.
at::Tensor LabToLinearRgb(const at::Tensor& lab) {
  const at::Tensor fy = (lab.select(1, 0) + 16.0) / 116.0;
  const at::Tensor f = at::stack({fy + lab.select(1, 1) / 500.0, fy, fy - lab.select(1, 2) / 200.0}, 1);
  const at::Tensor xyz = at::where(f > 0.206893, f.pow(3), (f - 16.0 / 116.0) / 7.787) * WhitePoint(lab);
  return Mix(xyz, {3.2404542f, -1.5371385f, -0.4985314f, -0.9692660f, 1.8760108f, 0.0415560f, 0.0556434f,
                   -0.2040259f, 1.0572252f});
}

// [N,1,H,W] bool: the Lab colour is inside the sRGB gamut (1/512 of slack for rounding).
at::Tensor InGamut(const at::Tensor& lab) {
  constexpr double kSlack = 1.0 / 512;
  const at::Tensor lin = LabToLinearRgb(lab);
  return at::logical_and(lin.ge(-kSlack), lin.le(1.0 + kSlack)).all(1, /*keepdim=*/true);
}

// Lab (base + t * detail, ab) with t per pixel: 1 where that is in gamut, else the largest t in
// [0, 1] that is, to 1/128 (7 bisection steps; a pixel already out of gamut at t = 0 keeps t = 0
// and is clipped by LabToRgb as before). The bisection runs on the out-of-gamut pixels only
// (gathered; usually a few percent of the crop): the same per-pixel arithmetic as over the whole
// crop, at a fraction of its cost (it was 8 full-crop gamut tests, a third of the generator).
at::Tensor FitDetailToGamut(const at::Tensor& base, const at::Tensor& detail, const at::Tensor& ab) {
  const at::Tensor full = at::cat({base + detail, ab}, 1);
  const at::Tensor out = InGamut(full).logical_not().view({-1});
  if (!out.any().item<bool>()) return full;
  const at::Tensor idx = out.nonzero().view({-1});
  const int64_t m = idx.size(0);
  auto pick = [&](const at::Tensor& t) {  // [1,C,H,W] -> [1,C,M,1]: the out-of-gamut pixels
    return t.reshape({t.size(1), -1}).index_select(1, idx).view({1, t.size(1), m, 1});
  };
  const at::Tensor b = pick(base), d = pick(detail), a = pick(ab);
  at::Tensor lo = at::zeros_like(b), hi = at::ones_like(b);
  for (int i = 0; i < 7; ++i) {
    const at::Tensor mid = (lo + hi) * 0.5;
    const at::Tensor ok = InGamut(at::cat({b + d * mid, a}, 1));
    lo = at::where(ok, mid, lo);
    hi = at::where(ok, hi, mid);
  }
  at::Tensor t = at::ones_like(base).view({-1});
  t.index_copy_(0, idx, lo.view({-1}));
  return at::cat({base + detail * t.view_as(base), ab}, 1);
}

// The fused face's Lab: the target's low frequencies (lighting, skin colour) with the source's
// details. L = blur_L(target) + t * (source - blur_L(source)); (a, b) = blur_ab(target) +
// chroma_detail * (source - blur_ab(source)). Blurs are over the warp's coverage only.
// t = 1 where that colour is inside the sRGB gamut; elsewhere the largest t in [0, 1] (to 1/128,
// by bisection) that is (FitDetailToGamut): a bright highlight or a dark source feature over a
// saturated target skin would otherwise be clipped per channel in RGB, which drops its chroma
// and shifts its hue (the cyan/grey spots on a warm target and under a profile source's hair).
at::Tensor TransferColour(const at::Tensor& src_lab, const at::Tensor& target_rgb, const at::Tensor& cov, int size,
                          const ClassicalGenerator::Options& o) {
  const int f = o.reduced_low_pass ? LowPassFactor(std::min(o.chroma_sigma, o.luminance_sigma) * size, size) : 1;
  const double sl_sigma = o.luminance_sigma * size / f, ab_sigma = o.chroma_sigma * size / f;
  const at::Tensor low_cov = Down(cov, f), low_src = Down(src_lab, f), low_dst = RgbToLab(Down(target_rgb, f));
  const at::Tensor norm_l = Blur(low_cov, sl_sigma).clamp_min(1e-4), norm_ab = Blur(low_cov, ab_sigma).clamp_min(1e-4);
  auto low_pass = [&](const at::Tensor& x, const at::Tensor& norm, double sigma) {
    return Up(MaskedBlur(x, low_cov, norm, sigma), size);
  };
  const at::Tensor base = low_pass(low_dst.narrow(1, 0, 1), norm_l, sl_sigma);
  const at::Tensor detail = (src_lab.narrow(1, 0, 1) - low_pass(low_src.narrow(1, 0, 1), norm_l, sl_sigma)) * o.luminance_detail;
  at::Tensor ab = low_pass(low_dst.narrow(1, 1, 2), norm_ab, ab_sigma);
  if (o.chroma_detail > 0) {
    ab = ab + (src_lab.narrow(1, 1, 2) - low_pass(low_src.narrow(1, 1, 2), norm_ab, ab_sigma)) * o.chroma_detail;
  }
  return o.gamut_fit ? FitDetailToGamut(base, detail, ab) : at::cat({base + detail, ab}, 1);
}

}  // namespace

at::Tensor RgbToLab(const at::Tensor& rgb) {
  const at::Tensor c = rgb.clamp(0.0, 1.0);
  const at::Tensor lin = at::where(c <= 0.04045, c / 12.92, at::pow((c + 0.055) / 1.055, 2.4));
  const at::Tensor xyz = Mix(lin, {0.4124564f, 0.3575761f, 0.1804375f, 0.2126729f, 0.7151522f,
                                   0.0721750f, 0.0193339f, 0.1191920f, 0.9503041f}) /
                         WhitePoint(rgb);
  const at::Tensor t = xyz.clamp_min(0.0);
  const at::Tensor f = at::where(t > 0.008856, at::pow(t, 1.0 / 3.0), t * 7.787 + 16.0 / 116.0);
  const at::Tensor fx = f.select(1, 0), fy = f.select(1, 1), fz = f.select(1, 2);
  return at::stack({fy * 116.0 - 16.0, (fx - fy) * 500.0, (fy - fz) * 200.0}, 1);
}

at::Tensor LabToRgb(const at::Tensor& lab) {
  const at::Tensor lin = LabToLinearRgb(lab).clamp(0.0, 1.0);
  return at::where(lin <= 0.0031308, lin * 12.92, at::pow(lin, 1.0 / 2.4) * 1.055 - 0.055).clamp(0.0, 1.0);
}

// The target's landmarks with their inner features (brows, eyes, nose, mouth: 17-67) moved
// `inner` of the way, and the jaw `jaw` of the way, toward the source's, after a least-squares
// similarity (Umeyama 1991, 2-D) maps the source's inner points onto the target's: the warp then
// keeps the source's proportions (eye spacing, nose length, mouth width) inside the target's pose
// and outline instead of stretching the source onto the target's geometry.
std::vector<cv::Point2f> ShapeTowardSource(const std::vector<cv::Point2f>& src, const std::vector<cv::Point2f>& dst,
                                           double inner, double jaw) {
  constexpr int kFirstInner = 17;
  double msx = 0, msy = 0, mdx = 0, mdy = 0;
  const int n = kNumLandmarks - kFirstInner;
  for (int i = kFirstInner; i < kNumLandmarks; ++i) {
    msx += src[i].x; msy += src[i].y; mdx += dst[i].x; mdy += dst[i].y;
  }
  msx /= n; msy /= n; mdx /= n; mdy /= n;
  double ss = 0, a = 0, b = 0;
  for (int i = kFirstInner; i < kNumLandmarks; ++i) {
    const double sx = src[i].x - msx, sy = src[i].y - msy, dx = dst[i].x - mdx, dy = dst[i].y - mdy;
    ss += sx * sx + sy * sy;
    a += sx * dx + sy * dy;
    b += sx * dy - sy * dx;
  }
  if (ss <= 0) return dst;
  a /= ss; b /= ss;
  std::vector<cv::Point2f> out = dst;
  for (int i = 0; i < kNumLandmarks; ++i) {
    const double sx = src[i].x - msx, sy = src[i].y - msy;
    const double tx = mdx + a * sx - b * sy, ty = mdy + b * sx + a * sy;
    const double w = i < kFirstInner ? jaw : inner;
    out[i] = cv::Point2f(static_cast<float>(dst[i].x + w * (tx - dst[i].x)),
                         static_cast<float>(dst[i].y + w * (ty - dst[i].y)));
  }
  return out;
}

std::vector<std::string> ClassicalGenerator::SourceNotes(const at::Tensor& source_landmarks) const {
  if (source_landmarks.dim() != 3 || source_landmarks.size(1) != kNumLandmarks) return {};
  const std::vector<cv::Point2f> src = ToPoints(source_landmarks);
  if (ForeshortenedSide(src) < 0) return {};
  const double left = HullArea(src, true), right = HullArea(src, false);
  const double ratio = std::max(left, right) / std::max(1e-6, std::min(left, right));
  return {absl::StrFormat(
      "generate: the source face is turned (one half of it %.1fx the area of the other): its hidden half is "
      "the mirror of the visible one, so the result carries less of the source's identity; a frontal photo "
      "of the source works best",
      ratio)};
}

absl::StatusOr<std::unique_ptr<ClassicalGenerator>> ClassicalGenerator::Create(Options options) {
  return std::unique_ptr<ClassicalGenerator>(new ClassicalGenerator(options));
}

absl::StatusOr<at::Tensor> ClassicalGenerator::Fuse(const GeneratorInputs& in) const {
  if (auto s = ValidateGeneratorInputs(in); !s.ok()) return s;
  const int size = static_cast<int>(in.target.size(2));
  const std::vector<cv::Point2f> src68 = ToPoints(in.source_landmarks);
  std::vector<cv::Point2f> dst68 = ToPoints(in.target_landmarks);
  const int side = ForeshortenedSide(src68);  // -1: not turned
  // A foreshortened source's inner points are half hidden: its proportions are not the face's.
  if (options_.source_shape > 0 && side < 0) {
    dst68 = ShapeTowardSource(src68, dst68, options_.source_shape, 0.0);
  }
  // The warp covers the swap region (swap_region.h): the 68 points and the forehead row above
  // the brows, the region whose hull the blend pastes.
  const std::vector<cv::Point2f> src = SwapRegionPoints(src68), dst = SwapRegionPoints(dst68);
  ASSIGN_OR_RETURN(std::vector<Triangle> tris, Delaunay(dst, size));
  try {
    cv::Mat ids;
    const at::Tensor affines = RasteriseAffines(tris, src, dst, size, /*mirror=*/false, &ids);
    auto [warped, cov] = PiecewiseAffineWarp(in.source, affines, ids);
    if (side >= 0) {
      // Soft symmetry: the target's half that the source shows foreshortened takes the mirror
      // of the source's visible half, split at the target's midline (HalfMask).
      const at::Tensor mirrored =
          PiecewiseAffineWarp(in.source, RasteriseAffines(tris, src, dst, size, /*mirror=*/true, nullptr), ids)
              .first;
      cv::Mat half = HalfMask(dst, side, size);
      const at::Tensor w =
          at::from_blob(half.data, {1, 1, size, size}, at::kFloat).to(in.source.device(), in.source.scalar_type());
      warped = warped + (mirrored - warped) * w;
    }
    at::Tensor face = warped;
    if (options_.colour_transfer) {
      face = LabToRgb(TransferColour(RgbToLab(warped), in.target, cov, size, options_));
    }
    const at::Tensor weight = cov * ForeheadRamp(dst, size, in.source.options());
    return in.target + (face - in.target) * weight * in.ratio;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("classical-fusion generator failed on a ", size, "x",
                                            size, " crop with ", tris.size(), " triangles: ",
                                            ExceptionText(e)));
  }
}

}  // namespace fusion::models
