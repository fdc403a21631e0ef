#include "video/video_probe.h"

#include <algorithm>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "video/av_input.h"
#include "base/status_macros.h"

namespace fusion::video {
namespace {

using internal::MemoryDemuxer;

struct PacketFree {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};

StreamInfo Describe(const AVStream* st) {
  const AVCodecParameters* p = st->codecpar;
  const char* type = av_get_media_type_string(p->codec_type);
  return StreamInfo{.index = st->index,
                    .type = type != nullptr ? type : "unknown",
                    .codec = avcodec_get_name(p->codec_id),
                    .mp4_carries = internal::Mp4Carries(p->codec_id)};
}

}  // namespace

bool LooksLikeVideoContainer(absl::string_view b) {
  if (b.size() >= 8 && b.substr(4, 4) == "ftyp") return true;                  // MP4, MOV, 3GP
  if (b.size() >= 4 && b.substr(0, 4) == absl::string_view("\x1a\x45\xdf\xa3", 4)) return true;  // MKV, WebM
  if (b.size() >= 12 && b.substr(0, 4) == "RIFF" && b.substr(8, 4) == "AVI ") return true;
  if (absl::StartsWith(b, "YUV4MPEG2")) return true;
  // QuickTime files may start with other atoms ('moov', 'mdat', 'wide', 'free').
  if (b.size() >= 8) {
    const absl::string_view atom = b.substr(4, 4);
    if (atom == "moov" || atom == "mdat" || atom == "wide" || atom == "free") return true;
  }
  return false;
}

namespace {

// A file whose streams end this long before the duration its container declares (or this share
// of it, whichever is more) is cut short: muxers' declared durations and their streams' last
// packets differ by a frame or an audio packet (~0.1 s).
constexpr double kDurationSlackS = 0.5;
constexpr double kDurationSlackShare = 0.1;

// A container that declares its duration in its header (MKV/WebM's segment duration, MP4's movie
// header) but whose streams all end well before it is a file cut short: an MKV cut in half
// demuxes cleanly and would be swapped as a shorter video. Every stream counts (a video that
// ends before its audio is whole); a duration FFmpeg estimated from the bit rate is no claim.
absl::Status CheckDeclaredDuration(const AVFormatContext* ctx, double streams_end_s, const std::string& what) {
  if (ctx->duration == AV_NOPTS_VALUE || ctx->duration <= 0 ||
      ctx->duration_estimation_method == AVFMT_DURATION_FROM_BITRATE || streams_end_s <= 0) {
    return absl::OkStatus();
  }
  const double start_s = ctx->start_time != AV_NOPTS_VALUE ? ctx->start_time / static_cast<double>(AV_TIME_BASE) : 0;
  const double declared_s = ctx->duration / static_cast<double>(AV_TIME_BASE);
  const double held_s = streams_end_s - start_s;
  if (held_s >= declared_s - std::max(kDurationSlackS, kDurationSlackShare * declared_s)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat("%s truncated: the container declares %.2f s, its streams end at %.2f s",
                                                    what, declared_s, held_s));
}

}  // namespace

absl::StatusOr<VideoInfo> ProbeVideo(absl::string_view bytes, const std::string& what, uint64_t max_pixels,
                                     FrameRange range) {
  ASSIGN_OR_RETURN(auto demuxer, MemoryDemuxer::Open(bytes, what, max_pixels));
  MemoryDemuxer& d = *demuxer;
  const AVStream* v = d.video();
  VideoInfo info;
  info.container = d.ctx()->iformat->name;
  info.codec = avcodec_get_name(v->codecpar->codec_id);
  info.video_stream = d.video_index();
  info.rotation = internal::UprightRotation(v);
  const bool sideways = info.rotation == 90 || info.rotation == 270;
  info.width = sideways ? v->codecpar->height : v->codecpar->width;
  info.height = sideways ? v->codecpar->width : v->codecpar->height;
  const AVRational rate = v->avg_frame_rate.num > 0 ? v->avg_frame_rate : v->r_frame_rate;
  info.fps = rate.num > 0 && rate.den > 0 ? av_q2d(rate) : 0;
  for (unsigned i = 0; i < d.ctx()->nb_streams; ++i) info.streams.push_back(Describe(d.ctx()->streams[i]));

  const int64_t origin = v->start_time != AV_NOPTS_VALUE ? v->start_time : 0;
  const double tb = av_q2d(v->time_base);
  std::unique_ptr<AVPacket, PacketFree> pkt(av_packet_alloc());
  int64_t last_end = origin;
  double streams_end_s = 0;  // where the latest packet of any stream ends, seconds (absolute)
  for (;;) {
    const int rc = av_read_frame(d.ctx(), pkt.get());
    if (rc == AVERROR_EOF) break;
    if (rc < 0) return internal::AvError(absl::StatusCode::kInvalidArgument, what, "damaged: a packet cannot be read", rc);
    const bool video = pkt->stream_index == d.video_index();
    if (pkt->pts != AV_NOPTS_VALUE) {
      const double stream_tb = av_q2d(d.ctx()->streams[pkt->stream_index]->time_base);
      const double end = static_cast<double>(pkt->pts) + static_cast<double>(std::max<int64_t>(pkt->duration, 0));
      streams_end_s = std::max(streams_end_s, end * stream_tb);  // in double: no int64 overflow
    }
    if (pkt->pos >= 0 && static_cast<uint64_t>(pkt->pos) + static_cast<uint64_t>(pkt->size) > d.size()) {
      return absl::InvalidArgumentError(absl::StrCat(what, " truncated: a packet's data at byte ", pkt->pos,
                                                     " runs past the end of the file (", d.size(), " bytes)"));
    }
    if (video) {
      ++info.frames;
      const int64_t pts = pkt->pts != AV_NOPTS_VALUE ? pkt->pts : pkt->dts;
      const double t = pts != AV_NOPTS_VALUE ? (pts - origin) * tb : 0;
      if (t >= range.start_s - 1e-9 && (range.duration_s <= 0 || t < range.start_s + range.duration_s - 1e-9)) {
        ++info.frames_in_range;
      }
      if (pts != AV_NOPTS_VALUE) last_end = std::max(last_end, pts + pkt->duration);
    }
    av_packet_unref(pkt.get());
  }
  if (v->nb_frames > 0 && info.frames < v->nb_frames) {
    return absl::InvalidArgumentError(absl::StrCat(what, " truncated: the container declares ", v->nb_frames,
                                                   " frames, the file holds ", info.frames));
  }
  if (info.frames == 0) return absl::InvalidArgumentError(absl::StrCat(what, ": the video stream has no frames"));
  RETURN_IF_ERROR(CheckDeclaredDuration(d.ctx(), streams_end_s, what));
  if (info.frames_in_range == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": no frame in the range from ", range.start_s, " s",
                                                   range.duration_s > 0 ? absl::StrCat(" for ", range.duration_s, " s")
                                                                        : std::string(" to the end"),
                                                   " (the video has ", info.frames, " frames)"));
  }
  info.duration_s = v->duration != AV_NOPTS_VALUE && v->duration > 0 ? v->duration * tb : (last_end - origin) * tb;
  return info;
}

}  // namespace fusion::video
