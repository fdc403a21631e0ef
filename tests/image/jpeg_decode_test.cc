// DecodeJpeg: the pixels OpenCV's decoder gives for whole JPEGs, and damaged data refused with
// the rows that were decoded.
#include "image/jpeg_decode.h"

#include <gtest/gtest.h>

#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>

#include "hostile_corpus.h"
#include "image/image_header.h"

namespace fusion {
namespace {

cv::Mat Face() { return cv::imread(FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg"); }

std::string Jpeg(const cv::Mat& m) {
  std::vector<uchar> out;
  cv::imencode(".jpg", m, out, {cv::IMWRITE_JPEG_QUALITY, 95});
  return std::string(out.begin(), out.end());
}

absl::StatusOr<cv::Mat> Decode(const std::string& bytes) {
  image::ImageHeader h;
  h.format = image::ImageFormat::kJpeg;
  if (auto read = image::ReadImageHeader(bytes, "target image"); read.ok()) h = *read;
  return DecodeJpeg(bytes, "target image", h);
}

double MaxDiff(const cv::Mat& a, const cv::Mat& b) {
  if (a.size() != b.size() || a.type() != b.type()) return 1e9;
  double m = 0;
  cv::Mat d;
  cv::absdiff(a, b, d);
  cv::minMaxLoc(d.reshape(1), nullptr, &m);
  return m;
}

TEST(DecodeJpeg, WholeJpegsDecodeToOpenCvsPixels) {
  for (const auto& in : testing::MakeHostileCorpus(Face())) {
    if (in.bytes.substr(0, 2) != "\xff\xd8" || in.submit_code != absl::StatusCode::kOk ||
        in.job_code == absl::StatusCode::kInvalidArgument) {
      continue;
    }
    SCOPED_TRACE(in.name);
    auto mine = Decode(in.bytes);
    ASSERT_TRUE(mine.ok()) << mine.status();
    const cv::Mat buf(1, static_cast<int>(in.bytes.size()), CV_8U, const_cast<char*>(in.bytes.data()));
    const cv::Mat theirs = cv::imdecode(buf, cv::IMREAD_ANYDEPTH | cv::IMREAD_ANYCOLOR);
    // CMYK: our Adobe conversion against OpenCV's (same formula); the rest bit for bit.
    EXPECT_LE(MaxDiff(*mine, theirs), in.name == "jpeg_cmyk" ? 1.0 : 0.0);
  }
  const std::string plain = Jpeg(Face());
  auto mine = Decode(plain);
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_EQ(MaxDiff(*mine, cv::imdecode(cv::Mat(1, static_cast<int>(plain.size()), CV_8U,
                                                const_cast<char*>(plain.data())), cv::IMREAD_COLOR)), 0.0);
}

TEST(DecodeJpeg, TruncatedJpegIsRefusedWithTheRowsDecoded) {
  const std::string whole = Jpeg(Face());
  auto cut = Decode(whole.substr(0, whole.size() / 3));
  EXPECT_EQ(cut.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string m(cut.status().message());
  EXPECT_EQ(m.rfind("target image truncated: ", 0), 0u) << m;
  EXPECT_NE(m.find(" of 600 rows decoded (the JPEG data ends early)"), std::string::npos) << m;
  const int rows = std::atoi(m.c_str() + std::string("target image truncated: ").size());
  EXPECT_GT(rows, 0);
  EXPECT_LT(rows, 600);
  EXPECT_EQ(Decode(whole.substr(0, whole.size() / 3)).status(), cut.status());  // deterministic
}

TEST(DecodeJpeg, GarbledScanIsRefusedAsCorruptFromItsFirstBadRow) {
  for (const auto& in : testing::MakeHostileCorpus(Face())) {
    if (in.name != "jpeg_scan_corrupt") continue;
    auto decoded = Decode(in.bytes);
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(decoded.status().message()).find("target image corrupt: the JPEG data is damaged (detected after row "),
              std::string::npos)
        << decoded.status();
    return;
  }
  FAIL() << "no jpeg_scan_corrupt in the corpus";
}

}  // namespace
}  // namespace fusion
