// libpng's messages through the daemon's log, not raw on stderr.
//
// OpenCV's PNG decoder (cv::imdecode) creates its libpng reader with no error or warning
// handler, so libpng's defaults print "libpng error: bad adaptive filter value" straight to
// stderr, with no time or level, and OpenCV offers no way to set them. fusiond defines
// png_create_read_struct itself: the dynamic linker binds OpenCV's call to this definition (the
// executable's symbols come first), which creates the reader with libpng's own
// png_create_read_struct_2 and the handlers below wherever the caller passed none. A caller's
// own handlers (daemon/image/png_header.cc) are kept. The error handler ends as libpng's
// default does, with png_longjmp to the caller's setjmp; the job then fails with its own message
// ("target image: the PNG data cannot be decoded ...").
// Linked into the fusiond executable only (an object, not an archive member, so that it is
// always the definition).
#include <png.h>

#include "spdlog/spdlog.h"

namespace {

void LogPngError(png_structp png, png_const_charp message) {
  spdlog::warn("libpng error (the image is refused): {}", message);
  png_longjmp(png, 1);
}

void LogPngWarning(png_structp, png_const_charp message) { spdlog::debug("libpng warning: {}", message); }

}  // namespace

extern "C" png_structp png_create_read_struct(png_const_charp user_png_ver, png_voidp error_ptr,
                                              png_error_ptr error_fn, png_error_ptr warn_fn) {
  return png_create_read_struct_2(user_png_ver, error_ptr, error_fn != nullptr ? error_fn : LogPngError,
                                  warn_fn != nullptr ? warn_fn : LogPngWarning, nullptr, nullptr, nullptr);
}
