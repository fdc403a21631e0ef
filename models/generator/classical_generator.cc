// Classical fusion generator: host geometry (Delaunay, triangle-id raster) + device tensor ops
// (piecewise-affine grid_sample, Lab colour transfer, ratio). See classical_generator.h.
#include "models/generator/classical_generator.h"

#include <ATen/ATen.h>

#include <array>
#include <cmath>
#include <opencv2/imgproc.hpp>
#include <vector>

#include "models/common/exception_text.h"
#include "absl/strings/str_cat.h"

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

// Rasterises each target triangle's id+1 (0 = not covered) and returns the per-triangle
// target->source affines as [T+1,2,3] float32 (row 0 unused, zeros).
at::Tensor RasteriseAffines(const std::vector<Triangle>& tris, const std::vector<cv::Point2f>& src,
                            const std::vector<cv::Point2f>& dst, int size, cv::Mat* ids) {
  *ids = cv::Mat::zeros(size, size, CV_16U);
  std::vector<float> affines(6, 0.0f);
  constexpr int kShift = 4;  // sub-pixel vertex precision for fillConvexPoly
  for (const Triangle& t : tris) {
    std::array<cv::Point2f, 3> d{dst[t[0]], dst[t[1]], dst[t[2]]};
    std::array<cv::Point2f, 3> s{src[t[0]], src[t[1]], src[t[2]]};
    if (Area2(d[0], d[1], d[2]) < 1e-3) continue;  // degenerate: no affine
    const cv::Mat a = cv::getAffineTransform(d.data(), s.data());
    for (int k = 0; k < 6; ++k) affines.push_back(static_cast<float>(a.at<double>(k / 3, k % 3)));
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

// Per-channel mean and std over the pixels where cov == 1; tensors [1,C,1,1].
std::pair<at::Tensor, at::Tensor> MaskedMoments(const at::Tensor& x, const at::Tensor& cov) {
  const at::Tensor n = cov.sum().clamp_min(1.0);
  const at::Tensor mean = (x * cov).sum({2, 3}, /*keepdim=*/true) / n;
  const at::Tensor var = ((x - mean).pow(2) * cov).sum({2, 3}, true) / n;
  return {mean, var.sqrt().clamp_min(1e-3)};
}

// Per-pixel 3x3 colour matrix on [N,3,H,W] (a matmul: conv2d 1x1 takes a slow BLAS path on CPU).
at::Tensor Mix(const at::Tensor& x, const std::array<float, 9>& m) {
  const at::Tensor w = at::tensor(at::ArrayRef<float>(m.data(), 9), x.options()).view({3, 3});
  return at::matmul(w, x.reshape({x.size(0), 3, -1})).view(x.sizes());
}

at::Tensor WhitePoint(const at::Tensor& like) {
  return at::tensor({0.95047f, 1.0f, 1.08883f}, like.options()).view({1, 3, 1, 1});
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
  const at::Tensor fy = (lab.select(1, 0) + 16.0) / 116.0;
  const at::Tensor f = at::stack({fy + lab.select(1, 1) / 500.0, fy, fy - lab.select(1, 2) / 200.0}, 1);
  const at::Tensor xyz = at::where(f > 0.206893, f.pow(3), (f - 16.0 / 116.0) / 7.787) * WhitePoint(lab);
  const at::Tensor lin = Mix(xyz, {3.2404542f, -1.5371385f, -0.4985314f, -0.9692660f, 1.8760108f,
                                   0.0415560f, 0.0556434f, -0.2040259f, 1.0572252f})
                             .clamp(0.0, 1.0);
  return at::where(lin <= 0.0031308, lin * 12.92, at::pow(lin, 1.0 / 2.4) * 1.055 - 0.055).clamp(0.0, 1.0);
}

absl::StatusOr<std::unique_ptr<ClassicalGenerator>> ClassicalGenerator::Create(Options options) {
  return std::unique_ptr<ClassicalGenerator>(new ClassicalGenerator(options));
}

absl::StatusOr<at::Tensor> ClassicalGenerator::Fuse(const GeneratorInputs& in) const {
  if (auto s = ValidateGeneratorInputs(in); !s.ok()) return s;
  const int size = static_cast<int>(in.target.size(2));
  const std::vector<cv::Point2f> src = ToPoints(in.source_landmarks);
  const std::vector<cv::Point2f> dst = ToPoints(in.target_landmarks);
  absl::StatusOr<std::vector<Triangle>> tris = Delaunay(dst, size);
  if (!tris.ok()) return tris.status();
  try {
    cv::Mat ids;
    const at::Tensor affines = RasteriseAffines(*tris, src, dst, size, &ids);
    const auto [warped, cov] = PiecewiseAffineWarp(in.source, affines, ids);
    at::Tensor face = warped;
    if (options_.colour_transfer) {
      const at::Tensor src_lab = RgbToLab(warped), dst_lab = RgbToLab(in.target);
      const auto [ms, ss] = MaskedMoments(src_lab, cov);
      const auto [mt, st] = MaskedMoments(dst_lab, cov);
      face = LabToRgb((src_lab - ms) / ss * st + mt);
    }
    return in.target + (face - in.target) * cov * in.ratio;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("classical-fusion generator failed on a ", size, "x",
                                            size, " crop with ", tris->size(), " triangles: ",
                                            ExceptionText(e)));
  }
}

}  // namespace fusion::models
