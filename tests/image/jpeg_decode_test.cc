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

// A photo stored turned or mirrored with the EXIF orientation that shows it upright (a phone held
// upside down writes 3) decodes upright: the same pixels, but for JPEG's rounding, as the photo
// itself (mean difference 0.5-0.7 levels measured); as stored it differs by 60 or more.
TEST(DecodeJpeg, EveryExifOrientationDecodesUpright) {
  const cv::Mat face = Face();
  // The stored image for each orientation: the inverse of the turn a viewer applies.
  auto stored = [&](int orientation) {
    cv::Mat out;
    switch (orientation) {
      case 2: cv::flip(face, out, 1); break;
      case 3: cv::rotate(face, out, cv::ROTATE_180); break;
      case 4: cv::flip(face, out, 0); break;
      case 5: cv::transpose(face, out); break;
      case 6: cv::rotate(face, out, cv::ROTATE_90_COUNTERCLOCKWISE); break;
      case 7: cv::transpose(face, out), cv::rotate(out, out, cv::ROTATE_180); break;
      case 8: cv::rotate(face, out, cv::ROTATE_90_CLOCKWISE); break;
      default: out = face.clone();
    }
    return out;
  };
  auto mean_diff = [](const cv::Mat& a, const cv::Mat& b) {
    if (a.size() != b.size()) return 1e9;
    cv::Mat d;
    cv::absdiff(a, b, d);
    return cv::mean(d.reshape(1))[0];
  };
  for (int o = 1; o <= 8; ++o) {
    SCOPED_TRACE(o);
    const cv::Mat s = stored(o);
    const std::string bytes = testing::WithExifOrientation(Jpeg(s), static_cast<uint16_t>(o));
    auto header = image::ReadImageHeader(bytes, "source image");
    ASSERT_TRUE(header.ok()) << header.status();
    EXPECT_EQ(header->orientation, static_cast<uint32_t>(o));
    EXPECT_EQ(header->width, static_cast<uint32_t>(face.cols));
    EXPECT_EQ(header->height, static_cast<uint32_t>(face.rows));
    auto decoded = Decode(bytes);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    const double upright = mean_diff(*decoded, face);
    std::printf("EXIF orientation %d: mean difference from the photo %.2f levels decoded, %.2f as stored\n", o,
                upright, s.size() == face.size() ? mean_diff(s, face) : -1.0);
    EXPECT_LT(upright, 2.0);
    if (o != 1 && s.size() == face.size()) {
      EXPECT_GT(mean_diff(s, face), 20.0);
    }
  }
}

}  // namespace
}  // namespace fusion
