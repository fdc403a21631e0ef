// image_diff A B: how far two images of the same size are apart, as one JSON line
// {"max_abs":N,"mean_abs":X,"psnr_db":Y,"width":W,"height":H} (8-bit channels; psnr_db is
// null for identical images). scripts/gpu-check compares a cuda:0 swap with the CPU one with it.
// Exit 0 when both decode and have one size, 2 otherwise (the reason on stderr).
#include <cmath>
#include <cstdio>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: image_diff A B\n");
    return 2;
  }
  const cv::Mat a = cv::imread(argv[1], cv::IMREAD_COLOR), b = cv::imread(argv[2], cv::IMREAD_COLOR);
  if (a.empty() || b.empty() || a.size() != b.size()) {
    std::fprintf(stderr, "image_diff: %s and %s do not both decode to one size\n", argv[1], argv[2]);
    return 2;
  }
  cv::Mat d;
  cv::absdiff(a, b, d);
  double max_abs = 0;
  cv::minMaxLoc(d.reshape(1), nullptr, &max_abs);
  const cv::Scalar mean = cv::mean(d);
  const double mean_abs = (mean[0] + mean[1] + mean[2]) / 3;
  const double psnr = cv::PSNR(a, b);
  std::printf("{\"max_abs\":%.0f,\"mean_abs\":%.4f,\"psnr_db\":", max_abs, mean_abs);
  if (std::isfinite(psnr) && max_abs > 0) {
    std::printf("%.2f", psnr);
  } else {
    std::printf("null");
  }
  std::printf(",\"width\":%d,\"height\":%d}\n", a.cols, a.rows);
  return 0;
}
