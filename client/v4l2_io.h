// fusionctl live's Video4Linux2 devices (docs/USER-GUIDE.md#cameras-and-virtual-cameras-v4l2):
// a camera read and a v4l2loopback device written through FFmpeg's libavdevice ("video4linux2"
// input and output formats). Built when libavdevice is found (FUSIONCTL_V4L2); which paths are
// devices: device_path.h.
// V4l2Capture: the device's own format (raw or MJPEG, as the driver offers), decoded and turned
// into BGR; pts in microseconds from the first frame. V4l2Output: rawvideo YUV 4:2:0 at the
// size of the first frame written, as v4l2loopback takes it.
// Untested on real hardware: the machine this was written on has no camera and no v4l2loopback;
// what is tested is the detection and the errors for paths that are not V4L2 devices.
// Errors: FAILED_PRECONDITION (a character device FFmpeg cannot open
// as V4L2: the message names the path and adds FFmpeg's words), INTERNAL (an FFmpeg without
// libavdevice's video4linux2, a decode or encode failure).
// Thread-safety: one object per thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <opencv2/core.hpp>

#include "absl/status/statusor.h"

struct AVFormatContext;
struct AVCodecContext;
struct AVFrame;
struct AVPacket;
struct SwsContext;

namespace fusion::ctl {

class V4l2Capture {
 public:
  static absl::StatusOr<std::unique_ptr<V4l2Capture>> Open(const std::string& path);
  ~V4l2Capture();
  V4l2Capture(const V4l2Capture&) = delete;
  V4l2Capture& operator=(const V4l2Capture&) = delete;

  int width() const { return width_; }
  int height() const { return height_; }
  double fps() const { return fps_; }  // the device's nominal rate; 30 when it names none
  // The next frame: BGR and its pts in microseconds since the first; false when the device
  // ends the stream.
  absl::StatusOr<bool> Next(cv::Mat* bgr, int64_t* pts_us);

 private:
  V4l2Capture() = default;
  std::string path_;
  AVFormatContext* fmt_ = nullptr;
  AVCodecContext* dec_ = nullptr;
  AVFrame* frame_ = nullptr;
  AVPacket* pkt_ = nullptr;
  SwsContext* sws_ = nullptr;
  int stream_ = -1;
  int width_ = 0, height_ = 0;
  double fps_ = 30;
  int64_t first_pts_ = INT64_MIN;
  bool draining_ = false;
};

class V4l2Output {
 public:
  // Opens `path` for frames of width x height at `fps`.
  static absl::StatusOr<std::unique_ptr<V4l2Output>> Open(const std::string& path, int width, int height,
                                                          double fps);
  ~V4l2Output();
  V4l2Output(const V4l2Output&) = delete;
  V4l2Output& operator=(const V4l2Output&) = delete;

  absl::Status Write(const cv::Mat& bgr);  // CV_8UC3 of the size given to Open
  absl::Status Finish();

 private:
  V4l2Output() = default;
  std::string path_;
  AVFormatContext* out_ = nullptr;
  AVCodecContext* enc_ = nullptr;
  AVFrame* yuv_ = nullptr;
  AVPacket* pkt_ = nullptr;
  SwsContext* sws_ = nullptr;
  int64_t next_pts_ = 0;
  bool header_written_ = false;
};

}  // namespace fusion::ctl
