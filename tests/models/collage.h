// Made detection test images with known ground truth: face crops (the 21 group-photo faces of
// ground_truth.json and the two public-domain portraits), scaled to chosen face widths and
// pasted with a feathered elliptical mask onto a face-free cluttered background (random shapes,
// lines, text, noise textures and smooth colour fields). The ground truth of a pasted face is
// its source box scaled and shifted: the detector's own box convention, so IoU >= 0.4 holds for
// a correct detection. Deterministic for a seed.
// Used by multiscale_pyramid_test.cc and bench/detect (recall per face size).
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <opencv2/imgproc.hpp>

#include "faceapi_fixture.h"
#include "ground_truth.h"

namespace fusion::faceapi {

struct FaceCrop {
  cv::Mat rgb;   // CV_8UC3: the face with context
  FaceBox face;  // the face's box in `rgb`
};

// Face box expanded by `context` of its width/height on every side, clipped to the photo.
inline FaceCrop CropAround(const cv::Mat& rgb, const FaceBox& b, float context = 0.45f) {
  const cv::Rect r = cv::Rect(static_cast<int>(b.x - context * b.w), static_cast<int>(b.y - context * b.h),
                              static_cast<int>(b.w * (1 + 2 * context)), static_cast<int>(b.h * (1 + 2 * context))) &
                     cv::Rect(0, 0, rgb.cols, rgb.rows);
  return {rgb(r).clone(), {b.x - r.x, b.y - r.y, b.w, b.h, 1}};
}

// 23 crops: the group photos' 21 faces, then the astronaut and Grace Hopper.
inline std::vector<FaceCrop> FaceCrops(const std::vector<Truth>& groups) {
  std::vector<FaceCrop> out;
  for (const Truth& t : groups) {
    for (const FaceBox& b : t.faces) out.push_back(CropAround(t.rgb, b));
  }
  out.push_back(CropAround(Face("astronaut_eileen_collins_512.png"), GoldenBox("astronaut.png")));
  out.push_back(CropAround(Face("grace_hopper_512x600.jpg"), GoldenBox("grace_hopper.jpg")));
  return out;
}

// A face-free, cluttered w x h RGB background: a smooth colour field, then shapes, lines,
// text and patches of noise texture, each with a random colour. ~1 s per 10 megapixels.
inline cv::Mat Clutter(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  cv::RNG noise_rng(seed);  // not cv::randu's thread-wide cv::theRNG(): the image is the seed's alone
  auto u = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  cv::Mat field(8, 8, CV_8UC3);
  noise_rng.fill(field, cv::RNG::UNIFORM, cv::Scalar::all(0), cv::Scalar::all(255));
  cv::Mat img;
  cv::resize(field, img, cv::Size(w, h), 0, 0, cv::INTER_CUBIC);
  const int side = std::max(w, h), shapes = std::max(60, static_cast<int>(300.0 * w * h / (2000.0 * 2000.0)));
  for (int i = 0; i < shapes; ++i) {
    const cv::Scalar c(u(0, 255), u(0, 255), u(0, 255));
    const cv::Point p(u(0, w - 1), u(0, h - 1));
    const int s = u(side / 200 + 4, side / 12 + 8);
    switch (u(0, 5)) {
      case 0: cv::rectangle(img, p, p + cv::Point(u(4, s), u(4, s)), c, u(0, 1) ? -1 : u(1, 6)); break;
      case 1: cv::circle(img, p, s / 2, c, u(0, 1) ? -1 : u(1, 6)); break;
      case 2: cv::line(img, p, cv::Point(u(0, w - 1), u(0, h - 1)), c, u(1, 8)); break;
      case 3: cv::ellipse(img, p, cv::Size(s, s / 3 + 1), u(0, 180), 0, 360, c, -1); break;
      case 4: cv::putText(img, "fusiond 0123 ABC", p, u(0, 7), s / 40.0 + 0.4, c, u(1, 4)); break;
      default: {
        const cv::Rect r = cv::Rect(p.x, p.y, s, s) & cv::Rect(0, 0, w, h);
        cv::Mat noise(r.size(), CV_8UC3);
        noise_rng.fill(noise, cv::RNG::UNIFORM, cv::Scalar::all(0), cv::Scalar::all(255));
        if (u(0, 1)) cv::GaussianBlur(noise, noise, cv::Size(0, 0), u(1, 3));
        cv::addWeighted(img(r), 0.5, noise, 0.5, 0, img(r));
      }
    }
  }
  return img;
}

// The crops rolled in turn by +deg and -deg about their face's centre (cv::getRotationMatrix2D:
// + is counter-clockwise), the border replicated; the face box keeps its centre and size (what
// an axis-aligned detector box of a rolled face holds: IoU >= 0.4 with it is a hit).
inline std::vector<FaceCrop> RolledCrops(const std::vector<FaceCrop>& crops, double deg) {
  std::vector<FaceCrop> out;
  for (size_t i = 0; i < crops.size(); ++i) {
    const FaceCrop& c = crops[i];
    const cv::Point2f centre(c.face.x + c.face.w / 2, c.face.y + c.face.h / 2);
    const cv::Mat m = cv::getRotationMatrix2D(centre, i % 2 == 0 ? deg : -deg, 1.0);
    FaceCrop r{cv::Mat(), c.face};
    cv::warpAffine(c.rgb, r.rgb, m, c.rgb.size(), cv::INTER_LINEAR, cv::BORDER_REPLICATE);
    out.push_back(std::move(r));
  }
  return out;
}

// Pastes `crop` scaled so its face is `face_w` pixels wide, top-left of the crop at `at`, with
// a feathered elliptical alpha (keeps the background around the head, drops the neighbours a
// group-photo crop may show at its corners). Returns the face's box in `img`.
inline FaceBox Paste(cv::Mat& img, const FaceCrop& crop, float face_w, cv::Point at) {
  const double k = face_w / crop.face.w;
  cv::Mat scaled;
  cv::resize(crop.rgb, scaled, cv::Size(std::max(1, static_cast<int>(crop.rgb.cols * k)), std::max(1, static_cast<int>(crop.rgb.rows * k))),
             0, 0, k < 1 ? cv::INTER_AREA : cv::INTER_CUBIC);
  cv::Mat alpha = cv::Mat::zeros(scaled.size(), CV_32F);
  cv::ellipse(alpha, cv::Point(scaled.cols / 2, scaled.rows / 2), cv::Size(scaled.cols * 0.46, scaled.rows * 0.48), 0, 0, 360,
              cv::Scalar(1), -1);
  const double blur = std::max(1.0, 0.04 * scaled.cols);
  cv::GaussianBlur(alpha, alpha, cv::Size(0, 0), blur);
  const cv::Rect dst = cv::Rect(at, scaled.size()) & cv::Rect(0, 0, img.cols, img.rows);
  for (int y = dst.y; y < dst.y + dst.height; ++y) {
    for (int x = dst.x; x < dst.x + dst.width; ++x) {
      const float a = alpha.at<float>(y - at.y, x - at.x);
      cv::Vec3b& p = img.at<cv::Vec3b>(y, x);
      const cv::Vec3b s = scaled.at<cv::Vec3b>(y - at.y, x - at.x);
      for (int c = 0; c < 3; ++c) p[c] = cv::saturate_cast<uchar>(a * s[c] + (1 - a) * p[c]);
    }
  }
  return {static_cast<float>(at.x + crop.face.x * k), static_cast<float>(at.y + crop.face.y * k),
          static_cast<float>(crop.face.w * k), static_cast<float>(crop.face.h * k), 1};
}

// A w x h collage on Clutter(seed): faces of the given widths (pixels), crops taken in turn,
// shelf-packed largest first with random gaps (a face that does not fit is left out). The
// ground truth holds every pasted face.
inline Truth MakeCollage(int w, int h, const std::vector<FaceCrop>& crops, std::vector<float> widths, uint32_t seed,
                         const std::string& name) {
  Truth t;
  t.name = name;
  t.rgb = Clutter(w, h, seed);
  std::mt19937 rng(seed + 1);
  std::sort(widths.rbegin(), widths.rend());
  int x = 0, y = 0, row_h = 0;
  size_t next = 0;
  for (float fw : widths) {
    const FaceCrop& c = crops[next++ % crops.size()];
    const double k = fw / c.face.w;
    const int cw = static_cast<int>(c.rgb.cols * k), ch = static_cast<int>(c.rgb.rows * k);
    const int gap = std::uniform_int_distribution<int>(2, 2 + static_cast<int>(fw / 4))(rng);
    if (x + cw > w) x = 0, y += row_h, row_h = 0;
    if (y + ch > h || cw > w) continue;
    t.faces.push_back(Paste(t.rgb, c, fw, {x, y}));
    x += cw + gap;
    row_h = std::max(row_h, ch + gap);
  }
  return t;
}

}  // namespace fusion::faceapi
