#include "v4l2_io.h"

#include <cerrno>
#include <cstring>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavdevice/avdevice.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}

#include "absl/strings/str_cat.h"

namespace fusion::ctl {
namespace {

std::string AvText(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(err, buf, sizeof buf);
  return buf;
}

// libavdevice's formats, registered once per process.
void RegisterDevices() {
  static const bool registered = [] {
    avdevice_register_all();
    return true;
  }();
  (void)registered;
}

}  // namespace

// ---- Capture --------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<V4l2Capture>> V4l2Capture::Open(const std::string& path) {
  RegisterDevices();
  const AVInputFormat* v4l2 = av_find_input_format("video4linux2");
  if (v4l2 == nullptr) return absl::InternalError("this FFmpeg has no video4linux2 input (libavdevice)");
  std::unique_ptr<V4l2Capture> c(new V4l2Capture());
  c->path_ = path;
  if (int rc = avformat_open_input(&c->fmt_, path.c_str(), v4l2, nullptr); rc < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("input ", path, ": not a V4L2 capture device FFmpeg can open (", AvText(rc), ")"));
  }
  if (int rc = avformat_find_stream_info(c->fmt_, nullptr); rc < 0) {
    return absl::FailedPreconditionError(absl::StrCat("input ", path, ": no stream information (", AvText(rc), ")"));
  }
  const AVCodec* codec = nullptr;
  c->stream_ = av_find_best_stream(c->fmt_, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
  if (c->stream_ < 0 || codec == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("input ", path, ": no video stream this FFmpeg decodes"));
  }
  const AVStream* s = c->fmt_->streams[c->stream_];
  c->dec_ = avcodec_alloc_context3(codec);
  c->frame_ = av_frame_alloc();
  c->pkt_ = av_packet_alloc();
  if (c->dec_ == nullptr || c->frame_ == nullptr || c->pkt_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("input ", path, ": no memory for the decoder"));
  }
  avcodec_parameters_to_context(c->dec_, s->codecpar);
  if (int rc = avcodec_open2(c->dec_, codec, nullptr); rc < 0) {
    return absl::InternalError(absl::StrCat("input ", path, ": cannot open its decoder (", AvText(rc), ")"));
  }
  c->width_ = c->dec_->width;
  c->height_ = c->dec_->height;
  if (c->width_ <= 0 || c->height_ <= 0) {
    return absl::FailedPreconditionError(absl::StrCat("input ", path, ": frames of ", c->width_, "x", c->height_));
  }
  const AVRational rate = s->avg_frame_rate.num > 0 ? s->avg_frame_rate : s->r_frame_rate;
  if (rate.num > 0 && rate.den > 0) c->fps_ = av_q2d(rate);
  return c;
}

V4l2Capture::~V4l2Capture() {
  sws_freeContext(sws_);
  av_packet_free(&pkt_);
  av_frame_free(&frame_);
  avcodec_free_context(&dec_);
  avformat_close_input(&fmt_);
}

absl::StatusOr<bool> V4l2Capture::Next(cv::Mat* bgr, int64_t* pts_us) {
  for (;;) {
    int rc = avcodec_receive_frame(dec_, frame_);
    if (rc == 0) break;
    if (rc == AVERROR_EOF) return false;
    if (rc != AVERROR(EAGAIN)) {
      return absl::InternalError(absl::StrCat("input ", path_, ": cannot decode a frame (", AvText(rc), ")"));
    }
    if (draining_) return false;
    rc = av_read_frame(fmt_, pkt_);
    if (rc == AVERROR_EOF) {
      draining_ = true;
      avcodec_send_packet(dec_, nullptr);
      continue;
    }
    if (rc < 0) return absl::InternalError(absl::StrCat("input ", path_, ": cannot read a frame (", AvText(rc), ")"));
    if (pkt_->stream_index == stream_) {
      rc = avcodec_send_packet(dec_, pkt_);
      if (rc < 0 && rc != AVERROR(EAGAIN)) {
        av_packet_unref(pkt_);
        return absl::InternalError(absl::StrCat("input ", path_, ": cannot decode a frame (", AvText(rc), ")"));
      }
    }
    av_packet_unref(pkt_);
  }
  // A device may change its size mid-stream: the frames keep the size it opened with.
  sws_ = sws_getCachedContext(sws_, frame_->width, frame_->height, static_cast<AVPixelFormat>(frame_->format), width_,
                              height_, AV_PIX_FMT_BGR24, SWS_BILINEAR, nullptr, nullptr, nullptr);
  if (sws_ == nullptr) return absl::InternalError(absl::StrCat("input ", path_, ": cannot convert its pixel format"));
  *bgr = cv::Mat(height_, width_, CV_8UC3);
  uint8_t* dst[4] = {bgr->data, nullptr, nullptr, nullptr};
  int dst_stride[4] = {static_cast<int>(bgr->step[0]), 0, 0, 0};
  sws_scale(sws_, frame_->data, frame_->linesize, 0, frame_->height, dst, dst_stride);
  const int64_t ts = frame_->best_effort_timestamp != AV_NOPTS_VALUE ? frame_->best_effort_timestamp : frame_->pts;
  const int64_t us = ts == AV_NOPTS_VALUE ? 0 : av_rescale_q(ts, fmt_->streams[stream_]->time_base, AVRational{1, 1000000});
  if (first_pts_ == INT64_MIN) first_pts_ = us;
  *pts_us = us - first_pts_;
  av_frame_unref(frame_);
  return true;
}

// ---- Output ---------------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<V4l2Output>> V4l2Output::Open(const std::string& path, int width, int height,
                                                             double fps) {
  RegisterDevices();
  std::unique_ptr<V4l2Output> o(new V4l2Output());
  o->path_ = path;
  if (int rc = avformat_alloc_output_context2(&o->out_, nullptr, "video4linux2", path.c_str()); rc < 0) {
    return absl::InternalError(absl::StrCat("output ", path, ": this FFmpeg has no video4linux2 output (libavdevice): ",
                                            AvText(rc)));
  }
  const AVCodec* raw = avcodec_find_encoder(AV_CODEC_ID_RAWVIDEO);
  if (raw == nullptr) return absl::InternalError("this FFmpeg has no rawvideo encoder");
  o->enc_ = avcodec_alloc_context3(raw);
  o->yuv_ = av_frame_alloc();
  o->pkt_ = av_packet_alloc();
  if (o->enc_ == nullptr || o->yuv_ == nullptr || o->pkt_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("output ", path, ": no memory for the encoder"));
  }
  o->enc_->width = width;
  o->enc_->height = height;
  o->enc_->pix_fmt = AV_PIX_FMT_YUV420P;
  o->enc_->time_base = av_inv_q(av_d2q(fps > 0 ? fps : 30, 1000));
  if (int rc = avcodec_open2(o->enc_, raw, nullptr); rc < 0) {
    return absl::InternalError(absl::StrCat("output ", path, ": cannot open the rawvideo encoder (", AvText(rc), ")"));
  }
  AVStream* s = avformat_new_stream(o->out_, nullptr);
  if (s == nullptr) return absl::ResourceExhaustedError(absl::StrCat("output ", path, ": no memory for its stream"));
  avcodec_parameters_from_context(s->codecpar, o->enc_);
  s->time_base = o->enc_->time_base;
  // The v4l2 output opens the device and sets its format here (AVFMT_NOFILE: no avio_open).
  if (int rc = avformat_write_header(o->out_, nullptr); rc < 0) {
    return absl::FailedPreconditionError(absl::StrCat("output ", path,
                                                      ": not a V4L2 output device (v4l2loopback) FFmpeg can open (",
                                                      AvText(rc), ")"));
  }
  o->header_written_ = true;
  o->yuv_->format = o->enc_->pix_fmt;
  o->yuv_->width = width;
  o->yuv_->height = height;
  if (int rc = av_frame_get_buffer(o->yuv_, 0); rc < 0) {
    return absl::ResourceExhaustedError(absl::StrCat("output ", path, ": no memory for a frame (", AvText(rc), ")"));
  }
  o->sws_ = sws_getContext(width, height, AV_PIX_FMT_BGR24, width, height, AV_PIX_FMT_YUV420P, SWS_BILINEAR, nullptr,
                           nullptr, nullptr);
  if (o->sws_ == nullptr) return absl::InternalError(absl::StrCat("output ", path, ": cannot convert BGR to YUV"));
  return o;
}

V4l2Output::~V4l2Output() {
  if (header_written_) av_write_trailer(out_);  // closes the device
  sws_freeContext(sws_);
  av_packet_free(&pkt_);
  av_frame_free(&yuv_);
  avcodec_free_context(&enc_);
  avformat_free_context(out_);
}

absl::Status V4l2Output::Write(const cv::Mat& bgr) {
  if (bgr.cols != enc_->width || bgr.rows != enc_->height || bgr.type() != CV_8UC3) {
    return absl::InvalidArgumentError(absl::StrCat("output ", path_, ": a ", bgr.cols, "x", bgr.rows,
                                                   " frame for a device opened at ", enc_->width, "x", enc_->height));
  }
  if (int rc = av_frame_make_writable(yuv_); rc < 0) {
    return absl::InternalError(absl::StrCat("output ", path_, ": ", AvText(rc)));
  }
  const uint8_t* src[4] = {bgr.data, nullptr, nullptr, nullptr};
  const int src_stride[4] = {static_cast<int>(bgr.step[0]), 0, 0, 0};
  sws_scale(sws_, src, src_stride, 0, bgr.rows, yuv_->data, yuv_->linesize);
  yuv_->pts = next_pts_++;
  if (int rc = avcodec_send_frame(enc_, yuv_); rc < 0) {
    return absl::InternalError(absl::StrCat("output ", path_, ": cannot encode a frame (", AvText(rc), ")"));
  }
  for (;;) {
    const int rc = avcodec_receive_packet(enc_, pkt_);
    if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return absl::OkStatus();
    if (rc < 0) return absl::InternalError(absl::StrCat("output ", path_, ": cannot encode a frame (", AvText(rc), ")"));
    pkt_->stream_index = 0;
    av_packet_rescale_ts(pkt_, enc_->time_base, out_->streams[0]->time_base);
    const int wrc = av_write_frame(out_, pkt_);
    av_packet_unref(pkt_);
    if (wrc < 0) {
      return absl::InternalError(absl::StrCat("output ", path_, ": cannot write a frame (", AvText(wrc), ")"));
    }
  }
}

absl::Status V4l2Output::Finish() {
  if (!header_written_) return absl::OkStatus();
  header_written_ = false;
  if (int rc = av_write_trailer(out_); rc < 0) {
    return absl::InternalError(absl::StrCat("output ", path_, ": cannot close the device (", AvText(rc), ")"));
  }
  return absl::OkStatus();
}

}  // namespace fusion::ctl
