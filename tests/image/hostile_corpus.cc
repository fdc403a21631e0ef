// The hostile-input corpus (hostile_corpus.h).
#include "hostile_corpus.h"

#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <jpeglib.h>
#include <map>
#include <random>
#include <tuple>
#include <sstream>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "absl/synchronization/mutex.h"

namespace fusion::testing {
namespace {

using absl::StatusCode;

void PutBe32(std::string& s, uint32_t v) {
  for (int shift : {24, 16, 8, 0}) s.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::string Chunk(const std::string& type, const std::string& data) {
  std::string out;
  PutBe32(out, static_cast<uint32_t>(data.size()));
  out += type + data;
  uLong crc = crc32(0, reinterpret_cast<const Bytef*>(type.data()), 4);
  crc = crc32(crc, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size()));
  PutBe32(out, static_cast<uint32_t>(crc));
  return out;
}

std::string Ihdr(uint32_t w, uint32_t h) {
  std::string d;
  PutBe32(d, w);
  PutBe32(d, h);
  d += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit RGB, deflate, no filter method, no interlace
  return d;
}

std::string Encode(const cv::Mat& m, const std::string& ext, std::vector<int> params = {}) {
  std::vector<uchar> out;
  if (!cv::imencode(ext, m, out, params)) std::abort();
  return std::string(out.begin(), out.end());
}

// A CMYK JPEG (Adobe convention: inverted values, as Photoshop writes them) of `bgr`.
std::string CmykJpeg(const cv::Mat& bgr) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* mem = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &mem, &size);
  c.image_width = static_cast<JDIMENSION>(bgr.cols);
  c.image_height = static_cast<JDIMENSION>(bgr.rows);
  c.input_components = 4;
  c.in_color_space = JCS_CMYK;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 92, TRUE);
  jpeg_start_compress(&c, TRUE);
  std::vector<unsigned char> row(static_cast<size_t>(bgr.cols) * 4);
  while (c.next_scanline < c.image_height) {
    const uchar* p = bgr.ptr<uchar>(static_cast<int>(c.next_scanline));
    for (int x = 0; x < bgr.cols; ++x) {
      const int b = p[3 * x], g = p[3 * x + 1], r = p[3 * x + 2];
      const int k = std::max({r, g, b, 1});  // inverted K: the brightest channel
      row[4 * x] = static_cast<unsigned char>(r * 255 / k);
      row[4 * x + 1] = static_cast<unsigned char>(g * 255 / k);
      row[4 * x + 2] = static_cast<unsigned char>(b * 255 / k);
      row[4 * x + 3] = static_cast<unsigned char>(k);
    }
    JSAMPROW rows[1] = {row.data()};
    jpeg_write_scanlines(&c, rows, 1);
  }
  jpeg_finish_compress(&c);
  std::string out(reinterpret_cast<char*>(mem), size);
  jpeg_destroy_compress(&c);
  std::free(mem);
  return out;
}

// A two-frame APNG from a PNG: acTL after IHDR, fcTL before IDAT, a second frame (fcTL + fdAT)
// repeating the first's data. Decoders without APNG support show the default image (frame 1).
std::string Apng(const std::string& png) {
  std::string head = png.substr(0, 8 + 25), idat_chunks, idat_data;
  size_t pos = 8 + 25;
  while (pos + 12 <= png.size()) {
    const uint32_t len = (uint32_t{static_cast<uint8_t>(png[pos])} << 24) | (uint32_t{static_cast<uint8_t>(png[pos + 1])} << 16) |
                         (uint32_t{static_cast<uint8_t>(png[pos + 2])} << 8) | static_cast<uint8_t>(png[pos + 3]);
    const std::string type = png.substr(pos + 4, 4);
    if (type == "IDAT") {
      idat_chunks += png.substr(pos, 12 + len);
      idat_data += png.substr(pos + 8, len);
    }
    pos += 12 + len;
  }
  const std::string w = png.substr(16, 4), h = png.substr(20, 4);
  auto fctl = [&](uint32_t seq) {
    std::string d;
    PutBe32(d, seq);
    d += w + h + std::string(8, '\0') + std::string("\x00\x01\x00\x0a\x00\x00", 6);  // at 0,0; 1/10 s
    return Chunk("fcTL", d);
  };
  std::string actl;
  PutBe32(actl, 2);
  PutBe32(actl, 0);
  std::string fdat;
  PutBe32(fdat, 2);
  fdat += idat_data;
  return head + Chunk("acTL", actl) + fctl(0) + idat_chunks + fctl(1) + Chunk("fdAT", fdat) + Chunk("IEND", "");
}

std::string TwoPageTiff(const cv::Mat& a, const cv::Mat& b) {
  char path[] = "/tmp/fusion-corpus-XXXXXX.tif";
  const int fd = mkstemps(path, 4);
  if (fd < 0) std::abort();
  close(fd);
  if (!cv::imwritemulti(path, std::vector<cv::Mat>{a, b})) std::abort();
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  std::remove(path);
  return s.str();
}

size_t Find(const std::string& s, const std::string& what) {
  const size_t at = s.find(what);
  if (at == std::string::npos) std::abort();
  return at;
}

// A JPEG whose SOF0 declares w x h over the scan data of a 16x16 image.
std::string JpegDeclaring(uint16_t w, uint16_t h) {
  std::string j = Encode(cv::Mat(16, 16, CV_8UC3, cv::Scalar(40, 80, 120)), ".jpg");
  const size_t sof = Find(j, "\xff\xc0");
  j[sof + 5] = static_cast<char>(h >> 8), j[sof + 6] = static_cast<char>(h & 0xff);
  j[sof + 7] = static_cast<char>(w >> 8), j[sof + 8] = static_cast<char>(w & 0xff);
  return j;
}

// A lossless WebP whose VP8L header declares 16383x16383 (the format's largest) over 16x16 data.
std::string WebpBomb() {
  std::string w = Encode(cv::Mat(16, 16, CV_8UC3, cv::Scalar(1, 2, 3)), ".webp", {cv::IMWRITE_WEBP_QUALITY, 101});
  if (w.substr(12, 4) != "VP8L" || static_cast<uint8_t>(w[20]) != 0x2f) std::abort();
  uint32_t bits = 0;
  for (int i = 0; i < 4; ++i) bits |= uint32_t{static_cast<uint8_t>(w[21 + i])} << (8 * i);
  bits = (bits & ~0x0fffffffu) | 16382u | (16382u << 14);
  for (int i = 0; i < 4; ++i) w[21 + i] = static_cast<char>((bits >> (8 * i)) & 0xff);
  return w;
}

}  // namespace

std::string WithExifOrientation(const std::string& jpeg, uint16_t orientation) {
  std::string tiff("MM\x00\x2a\x00\x00\x00\x08\x00\x01", 10);                  // header, 1 entry
  tiff += std::string("\x01\x12\x00\x03\x00\x00\x00\x01", 8);                   // Orientation SHORT x1
  tiff += std::string({'\0', static_cast<char>(orientation), '\0', '\0'});       // value
  tiff += std::string(4, '\0');                                                 // no next IFD
  const std::string payload = std::string("Exif\0\0", 6) + tiff;
  const size_t len = payload.size() + 2;
  std::string app1 = {'\xff', '\xe1', static_cast<char>(len >> 8), static_cast<char>(len & 0xff)};
  return jpeg.substr(0, 2) + app1 + payload + jpeg.substr(2);
}

std::string MakePngBomb(uint32_t width, uint32_t height, bool full_data);

std::string PngBomb(uint32_t width, uint32_t height, bool full_data) {
  // The 400 MP stream takes seconds to deflate: made once per process.
  static absl::Mutex mu;
  static auto* made = new std::map<std::tuple<uint32_t, uint32_t, bool>, std::string>;
  absl::MutexLock lock(&mu);
  std::string& png = (*made)[{width, height, full_data}];
  if (png.empty()) png = MakePngBomb(width, height, full_data);
  return png;
}

std::string MakePngBomb(uint32_t width, uint32_t height, bool full_data) {
  std::string idat;
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 15, 9, Z_RLE);  // runs of zeros: the densest stream, fast
  const std::string row(1 + 3 * static_cast<size_t>(width), '\0');  // filter byte 0 + pixels
  std::vector<Bytef> out(1 << 20);
  const uint32_t rows = full_data ? height : 1;
  for (uint32_t y = 0; y < rows; ++y) {
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(row.data()));
    z.avail_in = static_cast<uInt>(row.size());
    const int flush = y + 1 == rows ? Z_FINISH : Z_NO_FLUSH;
    do {
      z.next_out = out.data();
      z.avail_out = static_cast<uInt>(out.size());
      deflate(&z, flush);
      idat.append(reinterpret_cast<char*>(out.data()), out.size() - z.avail_out);
    } while (z.avail_out == 0);
  }
  deflateEnd(&z);
  std::string png("\x89PNG\r\n\x1a\n", 8);
  png += Chunk("IHDR", Ihdr(width, height));
  for (size_t at = 0; at < idat.size(); at += 1 << 18) png += Chunk("IDAT", idat.substr(at, 1 << 18));
  return png + Chunk("IEND", "");
}

std::vector<HostileInput> MakeHostileCorpus(const cv::Mat& face) {
  using C = StatusCode;
  const C kInvalid = C::kInvalidArgument, kOk = C::kOk, kNoFace = C::kFailedPrecondition;
  const uint32_t fw = static_cast<uint32_t>(face.cols), fh = static_cast<uint32_t>(face.rows);
  std::vector<HostileInput> c;
  auto add = [&](HostileInput in) { c.push_back(std::move(in)); };
  const std::string face_jpg = Encode(face, ".jpg", {cv::IMWRITE_JPEG_QUALITY, 95});
  const std::string face_png = Encode(face, ".png");
  const std::string face_webp = Encode(face, ".webp", {cv::IMWRITE_WEBP_QUALITY, 90});
  const std::string face_bmp = Encode(face, ".bmp");
  const char kNoTargetFace[] = "no face in the target image";

  // Bombs.
  add({"png_bomb_20000x20000", "PNG, 400 MP of zeros in a real 1 MB zlib stream", PngBomb(20000, 20000, true), kInvalid,
       "target image: 20000x20000 pixels (400000000) exceed the limit of 100000000 pixels (max_pixels)"});
  add({"png_bomb_12000x12000", "PNG header 144 MP (under OpenCV's 2^30 cap), tiny IDAT", PngBomb(12000, 12000, false),
       kInvalid, "target image: 12000x12000 pixels (144000000) exceed the limit"});
  add({"png_bomb_60000x60000", "PNG header 3.6 GP (over OpenCV's cap), tiny IDAT", PngBomb(60000, 60000, false),
       kInvalid, "target image: 60000x60000 pixels (3600000000) exceed the limit"});
  add({"jpeg_declares_60000x60000", "JPEG SOF0 declaring 60000x60000 over 16x16 data", JpegDeclaring(60000, 60000),
       kInvalid, "target image: 60000x60000 pixels"});
  add({"webp_declares_16383x16383", "lossless WebP header declaring 16383x16383 (268 MP)", WebpBomb(), kInvalid,
       "target image: 16383x16383 pixels"});
  // Truncated and corrupt.
  add({"jpeg_truncated_third", "face JPEG cut to its first third", face_jpg.substr(0, face_jpg.size() / 3), kInvalid,
       "target image truncated: the JPEG ends before its end-of-image marker"});
  add({"png_truncated_half", "face PNG cut in half", face_png.substr(0, face_png.size() / 2), kInvalid,
       "target image truncated: the PNG ends inside its IDAT chunk"});
  add({"webp_truncated_half", "face WebP cut in half", face_webp.substr(0, face_webp.size() / 2), kInvalid,
       "target image truncated: the WebP ends before"});
  add({"bmp_truncated_half", "face BMP cut in half", face_bmp.substr(0, face_bmp.size() / 2), kInvalid,
       "target image truncated: the BMP ends before its"});
  {
    std::string png = face_png;
    png[29] = static_cast<char>(png[29] ^ 0xff);  // IHDR's CRC
    add({"png_ihdr_crc_corrupt", "face PNG with IHDR's CRC flipped", png, kInvalid, "target image: corrupt PNG header"});
    png = face_png;
    const size_t idat = Find(png, "IDAT") + 4;
    for (size_t i = idat + 100; i < idat + 400; ++i) png[i] = static_cast<char>(png[i] ^ 0x5a);
    add({"png_idat_corrupt", "face PNG, complete, 300 bytes of IDAT garbled", png, kOk, "", kInvalid,
         "target image: the PNG data cannot be decoded", fw, fh, 3, 8});
    std::string jpg = face_jpg;
    jpg[Find(jpg, "\xff\xc0") + 4] = 7;  // SOF0 sample precision 7
    // Scan bytes garbled in the middle, markers and stuffing left intact: structurally whole.
    std::string scan = face_jpg;
    for (size_t i = scan.size() / 2; i < scan.size() / 2 + 1024; ++i) {
      const auto b = static_cast<uint8_t>(scan[i]), prev = static_cast<uint8_t>(scan[i - 1]);
      if (b != 0xff && prev != 0xff && (b ^ 0x55) != 0xff) scan[i] = static_cast<char>(b ^ 0x55);
    }
    add({"jpeg_scan_corrupt", "face JPEG, complete, 1 KiB of scan data garbled mid-file", scan, kOk, "", kInvalid,
         "target image corrupt: the JPEG data is damaged (detected after row", fw, fh, 3, 8});
    add({"jpeg_sof_precision_7", "face JPEG with SOF0 precision 7", jpg, kInvalid, "target image: corrupt JPEG header"});
  }
  // Not images.
  add({"text", "a line of text", "hello, this is not an image\n", kInvalid, "target image: unknown image format"});
  {
    std::mt19937 rng(11);
    std::string r(4096, '\0');
    for (char& ch : r) ch = static_cast<char>(rng());
    r[0] = '\0';  // no accidental magic
    add({"random_4096", "4096 random bytes", r, kInvalid, "target image: unknown image format"});
  }
  add({"empty", "0 bytes", "", kInvalid, "target image"});
  add({"jpeg2000", "face as JPEG 2000 (OpenCV decodes it; fusiond does not accept it)",
       Encode(face, ".jp2"), kInvalid, "fusiond accepts PNG, JPEG, WebP, TIFF and BMP"});
  add({"ppm", "face as binary PPM", Encode(face, ".ppm"), kInvalid, "target image: unknown image format"});
  // Odd but valid.
  add({"png_1x1", "1x1 PNG", Encode(cv::Mat(1, 1, CV_8UC3, cv::Scalar(9, 9, 9)), ".png"), kOk, "", kNoFace,
       kNoTargetFace, 1, 1, 3, 8});
  add({"png_10000x8", "10000x8 PNG strip", Encode(cv::Mat(8, 10000, CV_8UC3, cv::Scalar(90, 120, 150)), ".png"), kOk,
       "", kNoFace, kNoTargetFace, 10000, 8, 3, 8});
  {
    cv::Mat f16;
    face.convertTo(f16, CV_16UC3, 257.0);
    add({"png_16bit", "face, 16-bit RGB PNG", Encode(f16, ".png"), kOk, "", kOk, "", fw, fh, 3, 16});
    cv::Mat grey, rgba;
    cv::cvtColor(face, grey, cv::COLOR_BGR2GRAY);
    cv::cvtColor(face, rgba, cv::COLOR_BGR2BGRA);
    add({"png_grey", "face, 8-bit grey PNG", Encode(grey, ".png"), kOk, "", kOk, "", fw, fh, 1, 8});
    add({"png_rgba", "face, RGBA PNG", Encode(rgba, ".png"), kOk, "", kOk, "", fw, fh, 4, 8});
  }
  {
    // Stored rotated, eXIf orientation 6 after IHDR: OpenCV turns it upright.
    cv::Mat ccw;
    cv::rotate(face, ccw, cv::ROTATE_90_COUNTERCLOCKWISE);
    const std::string png = Encode(ccw, ".png");
    std::string tiff("MM\x00\x2a\x00\x00\x00\x08\x00\x01\x01\x12\x00\x03\x00\x00\x00\x01\x00\x06\x00\x00", 22);
    tiff += std::string(4, '\0');
    add({"png_exif_orientation_6", "face stored rotated, PNG eXIf orientation 6 (dims swapped)",
         png.substr(0, 33) + Chunk("eXIf", tiff) + png.substr(33), kOk, "", kOk, "", fw, fh, 3, 8, 1, 6});
  }
  add({"apng_2_frames", "face, two-frame APNG (the default image is decoded)", Apng(face_png), kOk, "", kOk, "", fw,
       fh, 3, 8, 2});
  add({"jpeg_cmyk", "face, CMYK JPEG (Adobe inverted)", CmykJpeg(face), kOk, "", kOk, "", fw, fh, 4, 8});
  {
    cv::Mat ccw, cw;
    cv::rotate(face, ccw, cv::ROTATE_90_COUNTERCLOCKWISE);
    cv::rotate(face, cw, cv::ROTATE_90_CLOCKWISE);
    add({"jpeg_exif_orientation_6", "face stored rotated, EXIF orientation 6 (dims swapped)",
         WithExifOrientation(Encode(ccw, ".jpg"), 6), kOk, "", kOk, "", fw, fh, 3, 8, 1, 6});
    add({"jpeg_exif_orientation_8", "face stored rotated, EXIF orientation 8 (dims swapped)",
         WithExifOrientation(Encode(cw, ".jpg"), 8), kOk, "", kOk, "", fw, fh, 3, 8, 1, 8});
  }
  {
    cv::Mat half;
    cv::resize(face, half, cv::Size(), 0.5, 0.5, cv::INTER_AREA);
    add({"tiff_2_pages", "face, two-page TIFF (the first page is decoded)", TwoPageTiff(face, half), kOk, "", kOk, "",
         fw, fh, 3, 8, 2});
  }
  add({"webp", "face, lossy WebP", face_webp, kOk, "", kOk, "", fw, fh, 3, 8});
  add({"bmp", "face, 24-bit BMP", face_bmp, kOk, "", kOk, "", fw, fh, 3, 8});
  {
    cv::Mat gradient(480, 640, CV_8UC3);
    for (int y = 0; y < gradient.rows; ++y) gradient.row(y).setTo(cv::Scalar(y / 2, 128, 255 - y / 2));
    add({"no_face", "640x480 gradient JPEG", Encode(gradient, ".jpg"), kOk, "", kNoFace, kNoTargetFace, 640, 480, 3, 8});
    // The central 60% of the photo (the face and little else), enlarged to 1000 pixels wide.
    const cv::Rect centre(fw / 5, fh / 5, fw * 3 / 5, fh * 3 / 5);
    cv::Mat filled;
    cv::resize(face(centre), filled, cv::Size(1000, 1000 * centre.height / centre.width), 0, 0, cv::INTER_CUBIC);
    add({"face_fills_frame", "the face's central 60% enlarged to 1000 px wide", Encode(filled, ".jpg"), kOk, "", kOk,
         "", 1000, static_cast<uint32_t>(filled.rows), 3, 8});
  }
  return c;
}

}  // namespace fusion::testing
