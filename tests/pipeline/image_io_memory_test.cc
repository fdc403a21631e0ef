// The host memory of decoding and encoding (image_io.h DecodeHostBytes / EncodeHostBytes), the
// figures the job admits on the host tier before it decodes or encodes: `kept` is exactly the
// decoded buffers, and the process's measured peak (VmHWM, reset with clear_refs 5) while
// DecodeImage / EncodeResult run stays within the estimate, per format. And a PNG's colour
// profile warning stays off stderr.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

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
