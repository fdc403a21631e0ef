// TIFF headers through libtiff on the bytes in memory (TIFFClientOpenExt with per-open
// diagnostic handlers: libtiff's process-wide handlers, which OpenCV also sets, are untouched).
// The first directory is the image; pages are counted; its strips/tiles must lie in the data.
#include <tiffio.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "image/header_formats.h"

namespace fusion::image::internal {
namespace {

struct TiffSource {
  absl::string_view bytes;
  uint64_t pos = 0;
  absl::string_view what;
  std::string error;
};

tmsize_t Read(thandle_t h, void* buf, tmsize_t n) {
  auto* s = static_cast<TiffSource*>(h);
  if (n <= 0 || s->pos >= s->bytes.size()) return 0;
  const uint64_t take = std::min<uint64_t>(static_cast<uint64_t>(n), s->bytes.size() - s->pos);
  std::memcpy(buf, s->bytes.data() + s->pos, take);
  s->pos += take;
  return static_cast<tmsize_t>(take);
}
tmsize_t Write(thandle_t, void*, tmsize_t) { return 0; }
toff_t Seek(thandle_t h, toff_t off, int whence) {
  auto* s = static_cast<TiffSource*>(h);
  const uint64_t base = whence == SEEK_CUR ? s->pos : whence == SEEK_END ? s->bytes.size() : 0;
  s->pos = base + off;
  return s->pos;
}
int Close(thandle_t) { return 0; }
toff_t Size(thandle_t h) { return static_cast<TiffSource*>(h)->bytes.size(); }
int Map(thandle_t, void**, toff_t*) { return 0; }
void Unmap(thandle_t, void*, toff_t) {}

int OnError(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  auto* s = static_cast<TiffSource*>(user);
  char text[512];
  std::vsnprintf(text, sizeof text, fmt, ap);
  if (s->error.empty()) s->error = absl::StrCat(module != nullptr ? module : "", ": ", text);
  return 1;
}
int OnWarning(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
  auto* s = static_cast<TiffSource*>(user);
  char text[512];
  std::vsnprintf(text, sizeof text, fmt, ap);
  LogLibraryMessage(s->what, "libtiff warning", absl::StrCat(module != nullptr ? module : "", ": ", text));
  return 1;
}

// The first directory's fields and strip extents.
absl::Status ReadFirstDirectory(TIFF* tif, TiffSource& src, ImageHeader& out) {
  uint32_t width = 0, height = 0;
  uint16_t spp = 1, bps = 1, extra = 0;
  uint16_t* extra_types = nullptr;
  if (TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width) != 1 || TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &height) != 1) {
    return Corrupt(src.what, "TIFF", "no ImageWidth/ImageLength");
  }
  TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
  TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bps);
  TIFFGetFieldDefaulted(tif, TIFFTAG_EXTRASAMPLES, &extra, &extra_types);
  // The layouts image_header.h promises (1-4 samples of 1-16 bits): anything else (e.g. 33667
  // samples per pixel, which image_fuzzer found accepted) is refused before a decoder sizes
  // buffers by it.
  if (spp < 1 || spp > 4 || bps < 1 || bps > 16) {
    return absl::InvalidArgumentError(absl::StrCat(src.what, ": unsupported TIFF layout (", spp,
                                                   " samples per pixel of ", bps,
                                                   " bits); fusiond accepts 1 to 4 samples of 1 to 16 bits"));
  }
  const uint32_t strips = TIFFNumberOfStrips(tif);  // strips or tiles
  for (uint32_t i = 0; i < strips; ++i) {
    int err = 0;
    const uint64_t offset = TIFFGetStrileOffsetWithErr(tif, i, &err);
    const uint64_t count = err == 0 ? TIFFGetStrileByteCountWithErr(tif, i, &err) : 0;
    if (err != 0) return Corrupt(src.what, "TIFF", absl::StrCat("strip ", i, " has no offset or byte count"));
    if (offset > src.bytes.size() || src.bytes.size() - offset < count) {
      return Truncated(src.what, absl::StrCat("the TIFF ends inside strip ", i + 1, " of ", strips), src.bytes.size());
    }
  }
  out.width = width;
  out.height = height;
  out.channels = spp;
  out.bit_depth = bps;
  out.alpha = extra > 0;
  out.alpha_known = false;  // OpenCV's TIFF reader decides how extra samples come out
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadTiff(absl::string_view bytes, absl::string_view what, ImageHeader& out) {
  TiffSource src{bytes, 0, what, {}};
  TIFFOpenOptions* opts = TIFFOpenOptionsAlloc();
  TIFFOpenOptionsSetErrorHandlerExtR(opts, OnError, &src);
  TIFFOpenOptionsSetWarningHandlerExtR(opts, OnWarning, &src);
  TIFFOpenOptionsSetMaxSingleMemAlloc(opts, 64 << 20);  // headers only: no big allocation
  TIFF* tif = TIFFClientOpenExt("image", "rm", &src, Read, Write, Seek, Close, Size, Map, Unmap, opts);
  TIFFOpenOptionsFree(opts);
  absl::Status st;
  if (tif == nullptr) {
    st = Corrupt(what, "TIFF", "the first directory cannot be read");
  } else {
    st = ReadFirstDirectory(tif, src, out);
    if (st.ok()) out.frames = std::max<uint32_t>(1, TIFFNumberOfDirectories(tif));
    TIFFClose(tif);
  }
  if (!src.error.empty()) LogLibraryMessage(what, "libtiff error", src.error);
  return st;
}

}  // namespace fusion::image::internal
