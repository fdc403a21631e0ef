#include "video/video_reader.h"

#include <cmath>

extern "C" {
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}

#include "absl/strings/str_cat.h"
#include "video/av_input.h"
#include "base/status_macros.h"

namespace fusion::video {

using internal::AvError;
using internal::kSwsFlags;

Packet::Packet() = default;
Packet::~Packet() { av_packet_free(&p_); }
Packet::Packet(Packet&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
Packet& Packet::operator=(Packet&& o) noexcept {
  if (this != &o) {
    av_packet_free(&p_);
    p_ = o.p_;
    o.p_ = nullptr;
  }
  return *this;
}
int Packet::stream_index() const { return p_ != nullptr ? p_->stream_index : -1; }
absl::string_view Packet::data() const {
  return p_ != nullptr ? absl::string_view(reinterpret_cast<const char*>(p_->data), p_->size) : absl::string_view();
}

uint64_t VideoReader::DecoderHostBytes(int width, int height, bool rotated) {
  const uint64_t px = static_cast<uint64_t>(width) * static_cast<uint64_t>(height);
  return px * 24 * 3 / 2 + px * 3 + (rotated ? px * 3 : 0);
}

double VideoReader::PtsSeconds(int64_t pts) const { return pts * av_q2d(demuxer_->video()->time_base); }

std::string VideoReader::StreamType(int index) const {
  const AVFormatContext* fmt = demuxer_->ctx();
  if (index < 0 || index >= static_cast<int>(fmt->nb_streams)) return "none";
  const char* t = av_get_media_type_string(fmt->streams[index]->codecpar->codec_type);
  return t != nullptr ? t : "unknown";
}

VideoReader::~VideoReader() {
  sws_freeContext(sws_);
  av_packet_free(&pkt_);
  av_frame_free(&frame_);
  avcodec_free_context(&dec_);
}

absl::StatusOr<std::unique_ptr<VideoReader>> VideoReader::Open(absl::string_view bytes, const std::string& what,
                                                              const Options& options) {
  ASSIGN_OR_RETURN(auto demuxer, internal::MemoryDemuxer::Open(bytes, what, options.max_pixels));
  std::unique_ptr<VideoReader> r(new VideoReader());
  r->demuxer_ = std::move(demuxer);
  r->what_ = what;
  r->options_ = options;
  AVStream* v = r->demuxer_->video();
  r->width_ = v->codecpar->width;
  r->height_ = v->codecpar->height;
  r->rotation_ = internal::UprightRotation(v);
  r->origin_ = v->start_time != AV_NOPTS_VALUE ? v->start_time : 0;
  const AVCodec* codec = avcodec_find_decoder(v->codecpar->codec_id);
  r->dec_ = avcodec_alloc_context3(codec);
  r->frame_ = av_frame_alloc();
  r->pkt_ = av_packet_alloc();
  if (r->dec_ == nullptr || r->frame_ == nullptr || r->pkt_ == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": no memory for the decoder"));
  }
  if (int rc = avcodec_parameters_to_context(r->dec_, v->codecpar); rc < 0) {
    return AvError(absl::StatusCode::kInvalidArgument, what, "bad video codec parameters", rc);
  }
  r->dec_->pkt_timebase = v->time_base;
  r->dec_->max_pixels = static_cast<int64_t>(options.max_pixels);
  r->dec_->thread_count = 2;  // frame threads: each holds a frame (DecoderHostBytes)
  if (int rc = avcodec_open2(r->dec_, codec, nullptr); rc < 0) {
    return AvError(absl::StatusCode::kInvalidArgument, what,
                   absl::StrCat("cannot open the ", avcodec_get_name(v->codecpar->codec_id), " decoder"), rc);
  }
  if (options.range.start_s > 0) {
    const int64_t ts = r->origin_ + static_cast<int64_t>(std::floor(options.range.start_s / av_q2d(v->time_base)));
    if (int rc = av_seek_frame(r->demuxer_->ctx(), r->demuxer_->video_index(), ts, AVSEEK_FLAG_BACKWARD); rc < 0) {
      return AvError(absl::StatusCode::kInvalidArgument, what, absl::StrCat("cannot seek to ", options.range.start_s, " s"), rc);
    }
  }
  return r;
}

// Presentation time of `pts` (stream `stream`'s time base) in seconds of the video's timeline.
bool VideoReader::InRange(int64_t pts, int stream) const {
  const FrameRange& range = options_.range;
  if (range.start_s <= 0 && range.duration_s <= 0) return true;  // everything, priming packets too
  if (pts == AV_NOPTS_VALUE) return false;
  const AVFormatContext* fmt = demuxer_->ctx();
  const double t = pts * av_q2d(fmt->streams[stream]->time_base) - origin_ * av_q2d(demuxer_->video()->time_base);
  if (t < range.start_s - 1e-9) return false;
  return range.duration_s <= 0 || t < range.start_s + range.duration_s - 1e-9;
}

// What is subtracted from stream `stream`'s timestamps: the range's start (0 without one).
int64_t VideoReader::Shift(int stream) const {
  if (options_.range.start_s <= 0) return 0;
  const AVRational vtb = demuxer_->video()->time_base;
  const int64_t start = origin_ + static_cast<int64_t>(std::llround(options_.range.start_s / av_q2d(vtb)));
  return av_rescale_q(start, vtb, demuxer_->ctx()->streams[stream]->time_base);
}

absl::Status VideoReader::Convert(const AVFrame* f, int64_t pts, Frame* out) {
  if (f->width != width_ || f->height != height_) {
    return absl::InvalidArgumentError(absl::StrCat(what_, ": frame ", decoded_, " is ", f->width, "x", f->height,
                                                   ", the stream's frames are ", width_, "x", height_));
  }
  sws_ = sws_getCachedContext(sws_, f->width, f->height, static_cast<AVPixelFormat>(f->format), width_, height_,
                              AV_PIX_FMT_BGR24, kSwsFlags, nullptr, nullptr, nullptr);
  if (sws_ == nullptr) {
    return absl::InternalError(absl::StrCat(what_, ": no conversion from pixel format ",
                                            av_get_pix_fmt_name(static_cast<AVPixelFormat>(f->format)), " to BGR"));
  }
  // A new buffer for every frame: a caller that kept an earlier frame's Mat (a header sharing
  // its data) while reusing the Item keeps that frame, not this one written over it.
  out->bgr = cv::Mat();
  cv::Mat& bgr = rotation_ == 0 ? out->bgr : stored_;
  bgr.create(height_, width_, CV_8UC3);
  uint8_t* dst[4] = {bgr.data, nullptr, nullptr, nullptr};
  int dst_stride[4] = {static_cast<int>(bgr.step[0]), 0, 0, 0};
  sws_scale(sws_, f->data, f->linesize, 0, f->height, dst, dst_stride);
  if (rotation_ != 0) {  // turned upright, as players show it (the output carries no rotation)
    cv::rotate(stored_, out->bgr, rotation_ == 90    ? cv::ROTATE_90_CLOCKWISE
                                  : rotation_ == 180 ? cv::ROTATE_180
                                                     : cv::ROTATE_90_COUNTERCLOCKWISE);
  }
  out->pts = pts - Shift(demuxer_->video_index());
  out->duration = f->pkt_duration;
  out->index = emitted_++;
  return absl::OkStatus();
}

// One decoded frame if the decoder has one: true with *item set, false when it needs input.
absl::StatusOr<bool> VideoReader::ReceiveFrame(Item* item) {
  for (;;) {
    const int rc = avcodec_receive_frame(dec_, frame_);
    if (rc == AVERROR(EAGAIN)) return false;
    if (rc == AVERROR_EOF) {
      done_ = true;
      return false;
    }
    if (rc < 0) {
      return AvError(absl::StatusCode::kInvalidArgument, what_,
                     absl::StrCat("damaged: frame ", decoded_, " cannot be decoded"), rc);
    }
    ++decoded_;
    int64_t pts = frame_->best_effort_timestamp;
    if (pts == AV_NOPTS_VALUE) pts = next_pts_;
    next_pts_ = pts + std::max<int64_t>(frame_->pkt_duration, 1);
    if (!InRange(pts, demuxer_->video_index())) {
      const double t = (pts - origin_) * av_q2d(demuxer_->video()->time_base);
      av_frame_unref(frame_);
      if (options_.range.duration_s > 0 && t >= options_.range.start_s + options_.range.duration_s) done_ = true;
      if (done_) return false;
      continue;
    }
    item->kind = Item::Kind::kFrame;
    item->packet = Packet();
    absl::Status st = Convert(frame_, pts, &item->frame);
    av_frame_unref(frame_);
    if (!st.ok()) return st;
    return true;
  }
}

absl::StatusOr<bool> VideoReader::Next(Item* item) {
  for (;;) {
    if (done_) return false;
    auto got = ReceiveFrame(item);
    if (!got.ok() || *got) return got;
    if (done_) return false;
    if (flushing_) continue;  // draining: ReceiveFrame ends with EOF
    const int rc = av_read_frame(demuxer_->ctx(), pkt_);
    if (rc == AVERROR_EOF) {
      if (!options_.decode_video) return false;
      flushing_ = true;
      avcodec_send_packet(dec_, nullptr);
      continue;
    }
    if (rc < 0) return AvError(absl::StatusCode::kInvalidArgument, what_, "damaged: a packet cannot be read", rc);
    if (pkt_->stream_index == demuxer_->video_index() && !options_.decode_video) {
      av_packet_unref(pkt_);
      continue;
    }
    if (pkt_->stream_index == demuxer_->video_index()) {
      const int sent = avcodec_send_packet(dec_, pkt_);
      av_packet_unref(pkt_);
      if (sent < 0 && sent != AVERROR(EAGAIN)) {
        return AvError(absl::StatusCode::kInvalidArgument, what_,
                       absl::StrCat("damaged: the data after frame ", decoded_, " cannot be decoded"), sent);
      }
      continue;
    }
    const int stream = pkt_->stream_index;
    if (!InRange(pkt_->pts != AV_NOPTS_VALUE ? pkt_->pts : pkt_->dts, stream)) {
      av_packet_unref(pkt_);
      continue;
    }
    const int64_t shift = Shift(stream);
    if (pkt_->pts != AV_NOPTS_VALUE) pkt_->pts -= shift;
    if (pkt_->dts != AV_NOPTS_VALUE) pkt_->dts -= shift;
    item->kind = Item::Kind::kPacket;
    item->frame = Frame();
    Packet p;
    p.p_ = av_packet_clone(pkt_);
    av_packet_unref(pkt_);
    if (p.p_ == nullptr) return absl::ResourceExhaustedError(absl::StrCat(what_, ": no memory for a packet"));
    item->packet = std::move(p);
    return true;
  }
}

}  // namespace fusion::video
