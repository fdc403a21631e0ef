// The host memory of decoding and encoding (image_io.h DecodeHostBytes / EncodeHostBytes), the
// figures the job admits on the host tier before it decodes or encodes: `kept` is exactly the
// decoded buffers, and the process's measured peak (VmHWM, reset with clear_refs 5) while
// DecodeImage / EncodeResult run stays within the estimate, per format. And a PNG's colour
// profile warning stays off stderr.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "image/image_header.h"
#include "pipeline/image_io.h"

namespace fusion {
namespace {

constexpr uint64_t MiB = uint64_t{1} << 20;

uint64_t StatusBytes(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    std::istringstream v(line.substr(field.size() + 1));
    uint64_t kb = 0;
    v >> kb;
    return kb * 1024;
  }
  return 0;
}

// The peak RSS `fn` adds to the process: VmHWM after it minus VmRSS before (peak reset first).
// Large blocks come straight from mmap (fixed threshold), so freed ones leave RSS at once and
// a later measurement is not hidden by memory the heap kept.
template <typename Fn>
uint64_t PeakAdded(Fn&& fn) {
  mallopt(M_MMAP_THRESHOLD, 64 * 1024);
  mallopt(M_TRIM_THRESHOLD, 128 * 1024);
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";
  const uint64_t before = StatusBytes("VmRSS");
  fn();
  const uint64_t hwm = StatusBytes("VmHWM");
  return hwm > before ? hwm - before : 0;
}

// A photo-like 8-bit BGR image (smooth gradients and noise: compresses as a photo does).
cv::Mat Photo(int w, int h) {
  cv::Mat m(h, w, CV_8UC3);
  cv::randu(m, 0, 255);
  cv::GaussianBlur(m, m, cv::Size(0, 0), 3);
  return m;
}

std::string Encode(const std::string& ext, const cv::Mat& m, std::vector<int> params = {}) {
  std::vector<uchar> buf;
  EXPECT_TRUE(cv::imencode(ext, m, buf, params));
  return std::string(buf.begin(), buf.end());
}

struct Case {
  std::string name;
  std::string bytes;
};

std::vector<Case> Cases() {
  const cv::Mat bgr = Photo(2000, 1500);
  cv::Mat grey, bgra, bgr16, bgra16;
  cv::cvtColor(bgr, grey, cv::COLOR_BGR2GRAY);
  cv::cvtColor(bgr, bgra, cv::COLOR_BGR2BGRA);
  bgr.convertTo(bgr16, CV_16U, 257.0);
  bgra.convertTo(bgra16, CV_16U, 257.0);
  return {{"png8_bgr", Encode(".png", bgr)},
          {"png8_grey", Encode(".png", grey)},
          {"png8_bgra", Encode(".png", bgra)},
          {"png16_bgr", Encode(".png", bgr16)},
          {"png16_bgra", Encode(".png", bgra16)},
          {"jpeg_baseline", Encode(".jpg", bgr, {cv::IMWRITE_JPEG_QUALITY, 95})},
          {"jpeg_progressive", Encode(".jpg", bgr, {cv::IMWRITE_JPEG_QUALITY, 95, cv::IMWRITE_JPEG_PROGRESSIVE, 1})},
          {"webp", Encode(".webp", bgr, {cv::IMWRITE_WEBP_QUALITY, 90})},
          {"tiff16", Encode(".tiff", bgr16)},
          {"bmp", Encode(".bmp", bgr)}};
}

TEST(ImageIoMemory, DecodePeakStaysWithinTheHeaderEstimateAndKeptIsTheDecodedBuffers) {
  for (const Case& c : Cases()) {
    auto header = image::ScreenImage(c.bytes, "target image", 100'000'000);
    ASSERT_TRUE(header.ok()) << c.name << ": " << header.status();
    const DecodeFootprint f = DecodeHostBytes(*header, c.bytes.size());
    absl::StatusOr<DecodedImage> img;
    const uint64_t peak = PeakAdded([&] { img = DecodeImage(c.bytes, "target image", 100'000'000); });
    ASSERT_TRUE(img.ok()) << c.name << ": " << img.status();
    const uint64_t decoded = img->original.total() * img->original.elemSize() +
                             (img->bgr.data == img->original.data ? 0 : img->bgr.total() * img->bgr.elemSize());
    std::printf("%-17s %zu bytes: decoded %.1f MiB, kept estimate %.1f MiB, scratch %.1f MiB, peak %.1f MiB\n",
                c.name.c_str(), c.bytes.size(), decoded / double(MiB), f.kept / double(MiB), f.scratch / double(MiB),
                peak / double(MiB));
    EXPECT_GE(f.kept, decoded) << c.name;
    EXPECT_LE(f.kept, decoded + img->bgr.total()) << c.name << ": the estimate is the buffers, not a guess";
    EXPECT_LE(peak, f.kept + f.scratch) << c.name;
    EXPECT_GE(peak, decoded / 2) << c.name << ": the measurement sees the decode";
  }
}

TEST(ImageIoMemory, EncodePeakStaysWithinTheEstimate) {
  const std::vector<Case> cases = Cases();
  for (const char* name : {"png8_bgr", "png8_grey", "png8_bgra", "png16_bgr", "png16_bgra"}) {
    for (v1::OutputFormat format : {v1::PNG, v1::JPEG}) {
      const Case* c = nullptr;
      for (const Case& k : cases) {
        if (k.name == name) c = &k;
      }
      ASSERT_NE(c, nullptr);
      auto target = DecodeImage(c->bytes, "target image", 100'000'000);
      ASSERT_TRUE(target.ok()) << target.status();
      cv::Mat result = target->bgr.clone();
      result(cv::Rect(400, 300, 800, 600)) = cv::Scalar(10, 200, 30);  // a changed region
      const uint64_t estimate = EncodeHostBytes(*target, format);
      absl::StatusOr<std::string> out;
      const uint64_t peak = PeakAdded([&] { out = EncodeResult(*target, result, format); });
      ASSERT_TRUE(out.ok()) << out.status();
      std::printf("encode %-11s as %s: %zu bytes, estimate %.1f MiB, peak %.1f MiB\n", name,
                  format == v1::JPEG ? "JPEG" : "PNG ", out->size(), estimate / double(MiB), peak / double(MiB));
      EXPECT_LE(peak, estimate) << name;
      EXPECT_GE(peak, out->size()) << name << ": the measurement sees the encode";
    }
  }
}

// What `fn` writes to stderr (fd 2, where libpng's default warning handler prints).
template <typename Fn>
std::string Stderr(Fn&& fn) {
  char path[] = "/tmp/image_io_stderr_XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  fflush(stderr);
  const int saved = dup(2);
  dup2(fd, 2);
  fn();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  unlink(path);
  return s.str();
}

// The astronaut PNG carries an sRGB profile libpng calls incorrect: cv::imdecode prints the
// warning to stderr, DecodeImage (which drops the iCCP chunk first) prints nothing and gives
// the same pixels.
// The PNG result (libpng, Up filter: image_io.cc WritePng) is lossless for every target format
// (grey, BGR, BGRA, 8 and 16 bit): unchanged pixels decode to the original samples, alpha
// included; changed ones to the 8-bit result at the target's depth.
TEST(ImageIo, PngResultDecodesToTheOriginalAndTheChangedPixelsExactly) {
  for (const Case& c : Cases()) {
    if (c.name.rfind("png", 0) != 0) continue;
    auto target = DecodeImage(c.bytes, "target image", 100'000'000);
    ASSERT_TRUE(target.ok()) << c.name << ": " << target.status();
    auto same = EncodeResult(*target, target->bgr, v1::PNG);
    ASSERT_TRUE(same.ok()) << c.name << ": " << same.status();
    const cv::Mat back = cv::imdecode(cv::Mat(1, static_cast<int>(same->size()), CV_8U, same->data()), cv::IMREAD_UNCHANGED);
    ASSERT_EQ(back.type(), target->original.type()) << c.name;
    EXPECT_EQ(cv::norm(back, target->original, cv::NORM_INF), 0) << c.name << ": unchanged pixels are exact";
    cv::Mat result = target->bgr.clone();
    const cv::Rect box(100, 50, 64, 32);
    result(box).setTo(cv::Scalar(10, 20, 30));
    auto changed = EncodeResult(*target, result, v1::PNG);
    ASSERT_TRUE(changed.ok()) << c.name << ": " << changed.status();
    const cv::Mat got = cv::imdecode(cv::Mat(1, static_cast<int>(changed->size()), CV_8U, changed->data()), cv::IMREAD_UNCHANGED);
    const double unit = got.depth() == CV_16U ? 257.0 : 1.0;
    const cv::Vec4d px = got.channels() == 1 ? cv::Vec4d(got.depth() == CV_16U ? got.at<uint16_t>(60, 110) : got.at<uchar>(60, 110))
                         : got.channels() == 3
                             ? (got.depth() == CV_16U ? cv::Vec4d(got.at<cv::Vec3w>(60, 110)[0], got.at<cv::Vec3w>(60, 110)[1], got.at<cv::Vec3w>(60, 110)[2], 0)
                                                      : cv::Vec4d(got.at<cv::Vec3b>(60, 110)[0], got.at<cv::Vec3b>(60, 110)[1], got.at<cv::Vec3b>(60, 110)[2], 0))
                             : (got.depth() == CV_16U ? cv::Vec4d(got.at<cv::Vec4w>(60, 110)[0], got.at<cv::Vec4w>(60, 110)[1], got.at<cv::Vec4w>(60, 110)[2], got.at<cv::Vec4w>(60, 110)[3])
                                                      : cv::Vec4d(got.at<cv::Vec4b>(60, 110)[0], got.at<cv::Vec4b>(60, 110)[1], got.at<cv::Vec4b>(60, 110)[2], got.at<cv::Vec4b>(60, 110)[3]));
    if (got.channels() == 1) {
      EXPECT_EQ(px[0], std::round(0.114 * 10 + 0.587 * 20 + 0.299 * 30) * unit) << c.name << ": the grey result";
    } else {
      EXPECT_EQ(px[0], 10 * unit) << c.name;
      EXPECT_EQ(px[1], 20 * unit) << c.name;
      EXPECT_EQ(px[2], 30 * unit) << c.name;
    }
    cv::Mat outside_got = got.clone(), outside_want = target->original.clone();
    outside_got(box).setTo(0);
    outside_want(box).setTo(0);
    if (got.channels() == 4) {  // alpha as decoded, inside the box too
      cv::Mat a, b;
      cv::extractChannel(got, a, 3);
      cv::extractChannel(target->original, b, 3);
      EXPECT_EQ(cv::norm(a, b, cv::NORM_INF), 0) << c.name << ": alpha";
    }
    EXPECT_EQ(cv::norm(outside_got, outside_want, cv::NORM_INF), 0) << c.name << ": pixels outside the change";
  }
}

TEST(ImageIo, PngWithAnIncorrectSrgbProfileDecodesTheSamePixelsWithNothingOnStderr) {
  std::ifstream in(FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png", std::ios::binary);
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string bytes = buf.str();
  ASSERT_NE(bytes.find("iCCP"), std::string::npos);
  cv::Mat direct;
  const std::string said = Stderr([&] {
    direct = cv::imdecode(cv::Mat(1, static_cast<int>(bytes.size()), CV_8U, const_cast<char*>(bytes.data())),
                          cv::IMREAD_UNCHANGED);
  });
  EXPECT_NE(said.find("iCCP: known incorrect sRGB profile"), std::string::npos) << said;
  absl::StatusOr<DecodedImage> img;
  EXPECT_EQ(Stderr([&] { img = DecodeImage(bytes, "source image", 100'000'000); }), "");
  ASSERT_TRUE(img.ok()) << img.status();
  ASSERT_EQ(img->original.size(), direct.size());
  ASSERT_EQ(img->original.type(), direct.type());
  EXPECT_EQ(cv::norm(img->original, direct, cv::NORM_INF), 0.0);
}

}  // namespace
}  // namespace fusion
