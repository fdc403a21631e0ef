#include "video/video_probe.h"

#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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
  for (;;) {
    const int rc = av_read_frame(d.ctx(), pkt.get());
    if (rc == AVERROR_EOF) break;
    if (rc < 0) return internal::AvError(absl::StatusCode::kInvalidArgument, what, "damaged: a packet cannot be read", rc);
    const bool video = pkt->stream_index == d.video_index();
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
