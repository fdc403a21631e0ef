#include "video/mp4_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern "C" {
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include "absl/strings/str_cat.h"
#include "video/av_input.h"
#include "video/fsync_path.h"
#include "base/status_macros.h"

namespace fusion::video {
namespace {

absl::Status EncodeError(const std::string& path, absl::string_view doing, int err) {
  const absl::StatusCode code =
      err == AVERROR(ENOSPC) ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kInternal;
  return internal::AvError(code, absl::StrCat("stage 'encode' (", path, ")"), doing, err);
}

AVRational Tb(const std::pair<int, int>& p) { return AVRational{p.first, p.second}; }

// The reader's video stream as a VideoShape.
VideoShape ShapeOf(const VideoReader& reader) {
  const AVStream* vin = reader.demuxer().video();
  const AVRational fps = vin->avg_frame_rate.num > 0 ? vin->avg_frame_rate : vin->r_frame_rate;
  return {.width = reader.width(), .height = reader.height(), .time_base_num = vin->time_base.num,
          .time_base_den = vin->time_base.den, .fps_num = fps.num, .fps_den = fps.den};
}

}  // namespace

uint64_t Mp4Writer::EncoderHostBytes(int width, int height, const EncodeOptions& o) {
  const uint64_t px = static_cast<uint64_t>(width) * static_cast<uint64_t>(height);
  const uint64_t yuv = (width % 2 == 0 && height % 2 == 0) ? px * 3 / 2 : px * 3;
  const uint64_t frames = static_cast<uint64_t>(o.lookahead_frames) + 3 /*B*/ + 4 /*refs*/ + 4 /*threads*/;
  return frames * yuv * 2 + yuv;
}

Mp4Writer::~Mp4Writer() {
  sws_freeContext(sws_);
  av_packet_free(&pkt_);
  av_frame_free(&yuv_);
  avcodec_free_context(&enc_);
  if (out_ != nullptr) {
    if (out_->pb != nullptr) avio_closep(&out_->pb);
    avformat_free_context(out_);
  }
}

absl::StatusOr<std::unique_ptr<Mp4Writer>> Mp4Writer::Create(const VideoReader& reader, const std::string& path,
                                                            const EncodeOptions& options,
                                                            std::vector<std::string>* degradations) {
  return Create(ShapeOf(reader), &reader, path, options, true, degradations);
}

absl::StatusOr<std::unique_ptr<Mp4Writer>> Mp4Writer::CreateVideoOnly(const VideoReader& reader,
                                                                     const std::string& path,
                                                                     const EncodeOptions& options) {
  return Create(ShapeOf(reader), &reader, path, options, false, nullptr);
}

absl::StatusOr<std::unique_ptr<Mp4Writer>> Mp4Writer::CreateVideoOnly(const VideoShape& shape, const std::string& path,
                                                                     const EncodeOptions& options) {
  if (shape.width <= 0 || shape.height <= 0 || shape.time_base_num <= 0 || shape.time_base_den <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("stage 'encode' (", path, "): frames of ", shape.width, "x",
                                                   shape.height, ", time base ", shape.time_base_num, "/",
                                                   shape.time_base_den));
  }
  return Create(shape, nullptr, path, options, false, nullptr);
}

absl::StatusOr<std::unique_ptr<Mp4Writer>> Mp4Writer::Create(const VideoShape& shape, const VideoReader* reader,
                                                            const std::string& path, const EncodeOptions& options,
                                                            bool copy_other_streams,
                                                            std::vector<std::string>* degradations) {
  internal::RouteFfmpegLog();
  std::unique_ptr<Mp4Writer> w(new Mp4Writer());
  w->path_ = path;
  const AVFormatContext* in = reader != nullptr ? reader->demuxer().ctx() : nullptr;
  const AVStream* vin = reader != nullptr ? reader->demuxer().video() : nullptr;
  const AVRational time_base{shape.time_base_num, shape.time_base_den};
  if (int rc = avformat_alloc_output_context2(&w->out_, nullptr, "mp4", path.c_str()); rc < 0) {
    return EncodeError(path, "cannot create the MP4 muxer", rc);
  }
  const AVCodec* x264 = avcodec_find_encoder_by_name("libx264");
  if (x264 == nullptr) return absl::InternalError("stage 'encode': this FFmpeg has no libx264 encoder");
  w->enc_ = avcodec_alloc_context3(x264);
  w->yuv_ = av_frame_alloc();
  w->pkt_ = av_packet_alloc();
  if (w->enc_ == nullptr || w->yuv_ == nullptr || w->pkt_ == nullptr) {
    return absl::ResourceExhaustedError("stage 'encode': no memory for the encoder");
  }
  const bool even = shape.width % 2 == 0 && shape.height % 2 == 0;
  w->enc_->width = shape.width;
  w->enc_->height = shape.height;
  w->enc_->pix_fmt = even ? AV_PIX_FMT_YUV420P : AV_PIX_FMT_YUV444P;  // 4:2:0 needs even sides
  w->enc_->time_base = time_base;
  w->enc_->framerate = AVRational{shape.fps_num, shape.fps_den};
  if (vin != nullptr) {
    w->enc_->sample_aspect_ratio = vin->codecpar->sample_aspect_ratio;
    w->enc_->color_range = vin->codecpar->color_range;
    w->enc_->color_primaries = vin->codecpar->color_primaries;
    w->enc_->color_trc = vin->codecpar->color_trc;
    w->enc_->colorspace = vin->codecpar->color_space;
  }
  if (w->out_->oformat->flags & AVFMT_GLOBALHEADER) w->enc_->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  av_opt_set(w->enc_->priv_data, "preset", options.preset.c_str(), 0);
  av_opt_set_double(w->enc_->priv_data, "crf", options.crf, 0);
  av_opt_set_int(w->enc_->priv_data, "rc-lookahead", options.lookahead_frames, 0);
  // libx264's AVX-512 code reads memory it never wrote: on an AVX-512 CPU the same frames gave
  // other bytes from one process to the next, so a resumed job's chunks were not an
  // uninterrupted run's (ffmpeg's CLI too: MALLOC_PERTURB_ changes the bitstream of a 240x282
  // clip with AVX-512, not with AVX2). So the encoder stops at AVX2 there (1080p veryfast: 3.51
  // s of CPU for 120 frames against 3.41 s), and WriteFrame zeroes its frames' padding; with
  // both, three fresh fusiond processes give the same bytes (without asm at all: 4.3x the CPU).
  if (__builtin_cpu_supports("avx512f")) av_opt_set(w->enc_->priv_data, "x264-params", "asm=AVX2", 0);
  if (int rc = avcodec_open2(w->enc_, x264, nullptr); rc < 0) return EncodeError(path, "cannot open libx264", rc);
  AVStream* vout = avformat_new_stream(w->out_, nullptr);
  if (vout == nullptr) return absl::ResourceExhaustedError("stage 'encode': no memory for the video stream");
  avcodec_parameters_from_context(vout->codecpar, w->enc_);
  vout->time_base = w->enc_->time_base;
  vout->avg_frame_rate = w->enc_->framerate;
  w->video_out_ = vout->index;
  for (unsigned i = 0; in != nullptr && i < in->nb_streams; ++i) {
    w->in_tb_.emplace_back(in->streams[i]->time_base.num, in->streams[i]->time_base.den);
  }
  if (copy_other_streams && reader != nullptr) {
    if (absl::Status st = internal::AddCopiedStreams(reader->demuxer(), w->out_, &w->stream_map_, degradations);
        !st.ok()) {
      return st;
    }
  } else {
    w->stream_map_.assign(in != nullptr ? in->nb_streams : 0, -1);
  }
  if (int rc = avio_open(&w->out_->pb, path.c_str(), AVIO_FLAG_WRITE); rc < 0) {
    return EncodeError(path, "cannot create the file", rc);
  }
  // The movie timescale (the edit list's unit) in the video's own time base: a segment whose
  // first frame is not at 0 gets an empty edit of exactly that start (at the default 1000 it
  // was rounded to ms: 0.533 s instead of 0.5333 s).
  AVDictionary* mux_options = nullptr;
  av_dict_set_int(&mux_options, "movie_timescale", time_base.den, 0);
  // The track keeps the target's time base: the MP4 muxer would double a timescale under 10000
  // until it is not (1/1000 came out 1/16000). Only a 1/N time base is a timescale.
  if (time_base.num == 1) av_dict_set_int(&mux_options, "video_track_timescale", time_base.den, 0);
  const int header_rc = avformat_write_header(w->out_, &mux_options);
  av_dict_free(&mux_options);
  if (header_rc < 0) return EncodeError(path, "cannot write the MP4 header", header_rc);
  w->header_written_ = true;
  w->yuv_->format = w->enc_->pix_fmt;
  w->yuv_->width = w->enc_->width;
  w->yuv_->height = w->enc_->height;
  if (int rc = av_frame_get_buffer(w->yuv_, 0); rc < 0) return EncodeError(path, "no memory for a frame", rc);
  return w;
}

absl::Status Mp4Writer::Drain(bool flushing) {
  for (;;) {
    const int rc = avcodec_receive_packet(enc_, pkt_);
    if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return absl::OkStatus();
    if (rc < 0) return EncodeError(path_, "libx264 failed", rc);
    if (auto it = durations_.find(pkt_->pts); it != durations_.end()) {
      if (it->second > 0) pkt_->duration = it->second;
      durations_.erase(it);
    }
    pkt_->stream_index = video_out_;
    av_packet_rescale_ts(pkt_, enc_->time_base, out_->streams[video_out_]->time_base);
    const int wrc = av_interleaved_write_frame(out_, pkt_);  // takes the packet's reference
    if (wrc < 0) return EncodeError(path_, "cannot write a video packet", wrc);
  }
}

absl::Status Mp4Writer::WriteFrame(const Frame& frame) {
  if (frame.bgr.cols != enc_->width || frame.bgr.rows != enc_->height || frame.bgr.type() != CV_8UC3) {
    return absl::InvalidArgumentError(absl::StrCat("stage 'encode' (", path_, "): frame ", frame.index, " is ",
                                                   frame.bgr.cols, "x", frame.bgr.rows, ", the video is ",
                                                   enc_->width, "x", enc_->height));
  }
  if (int rc = av_frame_make_writable(yuv_); rc < 0) return EncodeError(path_, "no memory for a frame", rc);
  // Zeroed, padding included: libx264 reads the rows' bytes past the width (sws_scale leaves
  // them; make_writable hands a fresh, uninitialised buffer while the encoder holds the last
  // frame), and heap garbage there changed its bitstream (see the asm note in Create).
  for (AVBufferRef* b : yuv_->buf) {
    if (b != nullptr) std::memset(b->data, 0, b->size);
  }
  sws_ = sws_getCachedContext(sws_, enc_->width, enc_->height, AV_PIX_FMT_BGR24, enc_->width, enc_->height,
                              enc_->pix_fmt, internal::kSwsFlags, nullptr, nullptr, nullptr);
  if (sws_ == nullptr) return absl::InternalError("stage 'encode': no BGR to YUV conversion");
  const uint8_t* src[4] = {frame.bgr.data, nullptr, nullptr, nullptr};
  const int stride[4] = {static_cast<int>(frame.bgr.step[0]), 0, 0, 0};
  sws_scale(sws_, src, stride, 0, enc_->height, yuv_->data, yuv_->linesize);
  yuv_->pts = frame.pts;
  durations_[frame.pts] = frame.duration;
  if (int rc = avcodec_send_frame(enc_, yuv_); rc < 0) {
    return EncodeError(path_, absl::StrCat("libx264 refused frame ", frame.index), rc);
  }
  return Drain(false);
}

absl::Status Mp4Writer::WritePacket(Packet& packet) {
  const int in = packet.stream_index();
  if (in < 0 || in >= static_cast<int>(stream_map_.size()) || stream_map_[in] < 0) return absl::OkStatus();
  AVPacket* p = packet.get();
  av_packet_rescale_ts(p, Tb(in_tb_[in]), out_->streams[stream_map_[in]]->time_base);
  p->stream_index = stream_map_[in];
  p->pos = -1;
  if (int rc = av_interleaved_write_frame(out_, p); rc < 0) {
    return EncodeError(path_, absl::StrCat("cannot write a packet of stream ", in), rc);
  }
  return absl::OkStatus();
}

absl::Status Mp4Writer::Finish() {
  if (finished_) return absl::OkStatus();
  finished_ = true;
  if (int rc = avcodec_send_frame(enc_, nullptr); rc < 0) return EncodeError(path_, "cannot flush libx264", rc);
  RETURN_IF_ERROR(Drain(true));
  if (int rc = av_write_trailer(out_); rc < 0) return EncodeError(path_, "cannot write the MP4 index", rc);
  if (int rc = avio_closep(&out_->pb); rc < 0) return EncodeError(path_, "cannot close the file", rc);
  if (const int err = FsyncPath(path_, /*directory=*/false); err != 0) {
    return EncodeError(path_, "cannot fsync the file", AVERROR(err));
  }
  return absl::OkStatus();
}

}  // namespace fusion::video
