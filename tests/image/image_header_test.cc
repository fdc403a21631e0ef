// ReadImageHeader / ScreenImage over the hostile corpus: every input's documented outcome,
// and a decompression bomb refused from its header without the process growing.
#include "image/image_header.h"

#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>

#include "hostile_corpus.h"

namespace fusion::image {
namespace {

constexpr uint64_t kMaxPixels = 100'000'000;  // the daemon's default max_pixels

const std::vector<testing::HostileInput>& Corpus() {
  static const auto* corpus = new std::vector<testing::HostileInput>(
      testing::MakeHostileCorpus(cv::imread(FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg")));
  return *corpus;
}

// kB from a /proc/self/status line ("VmHWM:   123 kB").
uint64_t StatusKb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) == 0) return std::stoull(line.substr(key.size() + 1));
  }
  return 0;
}

// Resets VmHWM to the current RSS (Linux >= 4.0), so the next reading is this test's peak.
bool ResetPeak() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

bool UnderAsan() {
#if defined(__SANITIZE_ADDRESS__)
  return true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  return true;
#endif
#endif
  return false;
}

TEST(ImageHeader, EveryHostileInputGetsItsDocumentedOutcome) {
  ASSERT_GE(Corpus().size(), 25u);
  for (const auto& in : Corpus()) {
    SCOPED_TRACE(in.name);
    auto header = ScreenImage(in.bytes, "target image", kMaxPixels);
    EXPECT_EQ(header.status().code(), in.submit_code) << header.status();
    EXPECT_NE(std::string(header.status().message()).find(in.submit_fragment), std::string::npos) << header.status();
    if (!header.ok()) {
      for (const char* library : {"OpenCV", "libpng", "libjpeg", "libtiff", "libwebp", "cv::", "Assertion"}) {
        EXPECT_EQ(std::string(header.status().message()).find(library), std::string::npos) << header.status();
      }
      continue;
    }
    EXPECT_EQ(header->width, in.width);
    EXPECT_EQ(header->height, in.height);
    EXPECT_EQ(header->channels, in.channels);
    EXPECT_EQ(header->bit_depth, in.bit_depth);
    EXPECT_EQ(header->frames, in.frames);
    EXPECT_EQ(header->orientation, in.orientation);
  }
}

TEST(ImageHeader, AcceptedInputsDecodeToTheirHeadersSize) {
  for (const auto& in : Corpus()) {
    if (in.submit_code != absl::StatusCode::kOk || in.job_code == absl::StatusCode::kInvalidArgument) continue;
    SCOPED_TRACE(in.name);
    const cv::Mat buf(1, static_cast<int>(in.bytes.size()), CV_8U, const_cast<char*>(in.bytes.data()));
    const cv::Mat m = cv::imdecode(buf, cv::IMREAD_ANYDEPTH | cv::IMREAD_ANYCOLOR);  // EXIF applied
    ASSERT_FALSE(m.empty());
    EXPECT_EQ(static_cast<uint32_t>(m.cols), in.width);
    EXPECT_EQ(static_cast<uint32_t>(m.rows), in.height);
  }
}

TEST(ImageHeader, BombIsRefusedFromItsHeaderWithoutTheProcessGrowing) {
  const std::string bomb = testing::PngBomb(20000, 20000, true);
  EXPECT_LT(bomb.size(), 2u << 20);  // a real 400 MP zlib stream of zeros
  const bool peak = ResetPeak();
  const uint64_t rss_kb = StatusKb("VmRSS");
  const auto start = std::chrono::steady_clock::now();
  auto header = ScreenImage(bomb, "target image", kMaxPixels);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const uint64_t hwm_kb = StatusKb("VmHWM");
  std::printf("20000x20000 PNG bomb (%zu bytes): refused in %.3f ms, VmHWM - VmRSS before = %lld kB\n", bomb.size(),
              ms, static_cast<long long>(hwm_kb) - static_cast<long long>(rss_kb));
  EXPECT_EQ(header.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(header.status().message(),
            "target image: 20000x20000 pixels (400000000) exceed the limit of 100000000 pixels (max_pixels)");
  if (UnderAsan() || !peak) GTEST_SKIP() << "VmHWM not measurable here (ASan or no clear_refs)";
  EXPECT_LT(hwm_kb, rss_kb + 50 * 1024);
}

// A little-endian, uncompressed, single-strip 4x4 TIFF with `spp` samples of `bps` bits each
// (BitsPerSample given once, which libtiff applies to every sample).
std::string HandMadeTiff(uint16_t spp, uint16_t bps, uint16_t photometric) {
  const uint32_t data_bytes = 4 * 4 * ((uint32_t{spp} * bps + 7) / 8);
  std::string t("II*\0", 4);
  auto u16 = [&](uint16_t v) { t.push_back(static_cast<char>(v & 0xff)), t.push_back(static_cast<char>(v >> 8)); };
  auto u32 = [&](uint32_t v) { u16(static_cast<uint16_t>(v & 0xffff)), u16(static_cast<uint16_t>(v >> 16)); };
  const uint16_t entries = 9;
  const uint32_t data_offset = 8 + 2 + entries * 12 + 4;
  u32(8);
  u16(entries);
  auto tag = [&](uint16_t id, uint16_t type, uint32_t value) {
    u16(id), u16(type), u32(1);
    if (type == 3) u16(static_cast<uint16_t>(value)), u16(0);
    else u32(value);
  };
  tag(256, 3, 4);               // ImageWidth
  tag(257, 3, 4);               // ImageLength
  tag(258, 3, bps);             // BitsPerSample
  tag(259, 3, 1);               // Compression: none
  tag(262, 3, photometric);     // PhotometricInterpretation
  tag(273, 4, data_offset);     // StripOffsets
  tag(277, 3, spp);             // SamplesPerPixel
  tag(278, 3, 4);               // RowsPerStrip
  tag(279, 4, data_bytes);      // StripByteCounts
  u32(0);                       // no next IFD
  t.append(data_bytes, '\x80');
  return t;
}

// image_fuzzer found a TIFF of 33667 samples per pixel accepted (the header promises 1-4
// channels of 1-16 bits); such layouts are refused at the header now.
TEST(ImageHeader, TiffLayoutsOutsideFourSamplesOfSixteenBitsAreRefused) {
  auto grey = ReadImageHeader(HandMadeTiff(1, 8, 1), "target image");
  ASSERT_TRUE(grey.ok()) << grey.status();
  EXPECT_EQ(grey->channels, 1u);
  EXPECT_EQ(grey->bit_depth, 8u);
  auto rgb16 = ReadImageHeader(HandMadeTiff(3, 16, 2), "target image");
  ASSERT_TRUE(rgb16.ok()) << rgb16.status();
  EXPECT_EQ(rgb16->channels, 3u);
  for (auto [spp, bps] : {std::pair<uint16_t, uint16_t>{5, 8}, {33667, 1}, {1, 32}, {3, 64}}) {
    auto h = ReadImageHeader(HandMadeTiff(spp, bps, spp >= 3 ? 2 : 1), "target image");
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << spp << "x" << bps;
    EXPECT_NE(h.status().message().find("unsupported TIFF layout"), std::string::npos) << h.status();
  }
}

// A grey baseline JPEG whose frame header (SOF0) is rewritten to declare `components`
// components, each like the original one; the scan still codes the first (libjpeg reads the
// header up to the first scan).
std::string JpegDeclaringComponents(int components) {
  cv::Mat grey(16, 16, CV_8UC1, cv::Scalar(128));
  std::vector<uchar> buf;
  EXPECT_TRUE(cv::imencode(".jpg", grey, buf));
  const std::string in(buf.begin(), buf.end());
  std::string out = in.substr(0, 2);
  for (size_t i = 2; i + 4 <= in.size();) {
    const auto marker = static_cast<uint8_t>(in[i + 1]);
    const size_t len = (static_cast<uint8_t>(in[i + 2]) << 8) | static_cast<uint8_t>(in[i + 3]);
    std::string seg = in.substr(i, 2 + len);
    if (marker == 0xc0) {
      std::string body = seg.substr(4, 5) + static_cast<char>(components);
      for (int k = 0; k < components; ++k) body += static_cast<char>(k + 1) + seg.substr(11, 2);
      seg = std::string("\xff\xc0", 2) + static_cast<char>((body.size() + 2) >> 8) +
            static_cast<char>((body.size() + 2) & 0xff) + body;
    }
    out += seg;
    i += 2 + len;
    if (marker == 0xda) {
      out += in.substr(i);
      break;
    }
  }
  return out;
}

// image_fuzzer's channel check: libjpeg reads frames of up to 10 components; only grey,
// YCbCr/RGB and CMYK/YCCK are images here.
TEST(ImageHeader, JpegFramesOfOtherThanOneThreeOrFourComponentsAreRefused) {
  auto grey = ReadImageHeader(JpegDeclaringComponents(1), "target image");
  ASSERT_TRUE(grey.ok()) << grey.status();
  EXPECT_EQ(grey->channels, 1u);
  for (int n : {2, 5, 10}) {
    auto h = ReadImageHeader(JpegDeclaringComponents(n), "target image");
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_NE(h.status().message().find("unsupported JPEG layout"), std::string::npos) << h.status();
  }
}

TEST(ImageHeader, PixelLimitIsInclusive) {
  const std::string png = testing::PngBomb(100, 100, true);
  EXPECT_TRUE(ScreenImage(png, "source image", 10000).ok());
  EXPECT_EQ(ScreenImage(png, "source image", 9999).status().message(),
            "source image: 100x100 pixels (10000) exceed the limit of 9999 pixels (max_pixels)");
}

TEST(ImageHeader, EveryPrefixOfAnAcceptedImageIsRefusedAsInvalid) {
  // (A TIFF cut after its first page keeps a whole first page: accepted, and it decodes.)
  // Cut points through the headers (every byte of the first 256) and the data of each format.
  for (const auto& in : Corpus()) {
    if (in.submit_code != absl::StatusCode::kOk) continue;
    SCOPED_TRACE(in.name);
    for (size_t cut = 0; cut < in.bytes.size(); cut += cut < 256 ? 1 : std::max<size_t>(1, in.bytes.size() / 64)) {
      auto header = ReadImageHeader(absl::string_view(in.bytes.data(), cut), "target image");
      if (header.ok() && in.name == "tiff_2_pages") {
        // Cut inside a later page: the first page, the one decoded, is whole.
        const cv::Mat buf(1, static_cast<int>(cut), CV_8U, const_cast<char*>(in.bytes.data()));
        const cv::Mat m = cv::imdecode(buf, cv::IMREAD_UNCHANGED);
        EXPECT_EQ(m.cols, static_cast<int>(in.width)) << "cut at " << cut;
        EXPECT_EQ(m.rows, static_cast<int>(in.height)) << "cut at " << cut;
        continue;
      }
      EXPECT_EQ(header.status().code(), absl::StatusCode::kInvalidArgument) << "cut at " << cut;
    }
  }
}

}  // namespace
}  // namespace fusion::image
