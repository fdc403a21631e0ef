#include "video/segment_join.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "video/av_input.h"
#include "video/fsync_path.h"
#include "base/status_macros.h"

namespace fusion::video {
namespace {

absl::Status JoinError(const std::string& path, absl::string_view doing, int err) {
  const absl::StatusCode code =
      err == AVERROR(ENOSPC) ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kInternal;
  return internal::AvError(code, absl::StrCat("stage 'join' (", path, ")"), doing, err);
}

// A segment file mapped read-only and demuxed from the mapping.
class Segment {
 public:
  static absl::StatusOr<std::unique_ptr<Segment>> Open(const std::string& path) {
    std::unique_ptr<Segment> s(new Segment());
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0 || st.st_size == 0) {
      const int err = errno;
      if (fd >= 0) ::close(fd);
      return absl::InternalError(absl::StrCat("stage 'join': cannot read the segment ", path, ": ",
                                              fd >= 0 && st.st_size == 0 ? "empty" : std::strerror(err)));
    }
    void* map = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) return absl::InternalError(absl::StrCat("stage 'join': cannot map the segment ", path));
    s->map_ = map;
    s->size_ = static_cast<size_t>(st.st_size);
    ASSIGN_OR_RETURN(auto demuxer, internal::MemoryDemuxer::Open(absl::string_view(static_cast<const char*>(map), s->size_),
                                                 absl::StrCat("stage 'join': segment ", path), uint64_t{1} << 40));
    s->demuxer_ = std::move(demuxer);
    return s;
  }
  ~Segment() {
    av_packet_free(&ahead_);
    demuxer_.reset();
    if (map_ != nullptr) ::munmap(map_, size_);
  }
  const AVStream* video() const { return demuxer_->video(); }
  // The next packet of the video stream into `pkt`; false at the end.
  // The MP4 demuxer gives a segment's last sample (in decode order) no duration when the segment
  // starts after 0 (its edit list); the muxer would then guess it from the frame rate (a VFR
  // target's 40-ms last frame came out 152 ms). It is the segment's sample durations' sum (the
  // stream's duration) past its first dts, less its dts. Reads one packet ahead to know the last.
  absl::StatusOr<bool> Next(AVPacket* pkt, const std::string& path) {
    if (ahead_ == nullptr) {
      ahead_ = av_packet_alloc();
      if (ahead_ == nullptr) return absl::ResourceExhaustedError("stage 'join': no memory for a packet");
      ASSIGN_OR_RETURN(auto first, Read(ahead_, path));
      have_ahead_ = first;
      if (have_ahead_) first_dts_ = ahead_->dts;
    }
    if (!have_ahead_) return false;
    av_packet_move_ref(pkt, ahead_);
    ASSIGN_OR_RETURN(auto more, Read(ahead_, path));
    have_ahead_ = more;
    const int64_t total = video()->duration;
    if (!have_ahead_ && pkt->duration <= 0 && pkt->dts != AV_NOPTS_VALUE && first_dts_ != AV_NOPTS_VALUE &&
        total > 0 && first_dts_ + total > pkt->dts) {
      pkt->duration = first_dts_ + total - pkt->dts;
    }
    return true;
  }

 private:
  Segment() = default;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  void* map_ = nullptr;
  size_t size_ = 0;
  int64_t first_dts_ = AV_NOPTS_VALUE;  // of the segment's first video packet
  AVPacket* ahead_ = nullptr;           // the packet after the one Next returned
  bool have_ahead_ = false;

  absl::StatusOr<bool> Read(AVPacket* pkt, const std::string& path) {
    for (;;) {
      const int rc = av_read_frame(demuxer_->ctx(), pkt);
      if (rc == AVERROR_EOF) return false;
      if (rc < 0) return JoinError(path, "cannot read a packet of the segment", rc);
      if (pkt->stream_index == demuxer_->video_index()) return true;
      av_packet_unref(pkt);
    }
  }
  std::unique_ptr<internal::MemoryDemuxer> demuxer_;
};

struct Output {
  AVFormatContext* ctx = nullptr;
  ~Output() {
    if (ctx != nullptr) {
      if (ctx->pb != nullptr) avio_closep(&ctx->pb);
      avformat_free_context(ctx);
    }
  }
};

bool SameCodec(const AVCodecParameters* a, const AVCodecParameters* b) {
  return a->codec_id == b->codec_id && a->width == b->width && a->height == b->height &&
         a->extradata_size == b->extradata_size &&
         (a->extradata_size == 0 || std::memcmp(a->extradata, b->extradata, a->extradata_size) == 0);
}

}  // namespace

absl::Status JoinSegments(const std::vector<std::string>& segments, VideoReader& packets, const std::string& out_path,
                          std::vector<std::string>* degradations) {
  internal::RouteFfmpegLog();
  if (segments.empty()) return absl::InternalError("stage 'join': no segments to join");
  ASSIGN_OR_RETURN(auto seg, Segment::Open(segments[0]));
  Output out;
  if (int rc = avformat_alloc_output_context2(&out.ctx, nullptr, "mp4", out_path.c_str()); rc < 0) {
    return JoinError(out_path, "cannot create the MP4 muxer", rc);
  }
  AVStream* vout = avformat_new_stream(out.ctx, nullptr);
  if (vout == nullptr) return absl::ResourceExhaustedError("stage 'join': no memory for the video stream");
  const AVStream* vseg = seg->video();
  avcodec_parameters_copy(vout->codecpar, vseg->codecpar);
  vout->codecpar->codec_tag = 0;
  vout->time_base = vseg->time_base;
  vout->avg_frame_rate = packets.demuxer().video()->avg_frame_rate;
  AVCodecParameters* first = avcodec_parameters_alloc();
  if (first == nullptr) return absl::ResourceExhaustedError("stage 'join': no memory");
  std::unique_ptr<AVCodecParameters, void (*)(AVCodecParameters*)> first_owner(
      first, [](AVCodecParameters* p) { avcodec_parameters_free(&p); });
  avcodec_parameters_copy(first, vseg->codecpar);
  const AVRational seg_tb = vseg->time_base;
  std::vector<int> stream_map;
  if (absl::Status st = internal::AddCopiedStreams(packets.demuxer(), out.ctx, &stream_map, degradations); !st.ok()) {
    return st;
  }
  if (int rc = avio_open(&out.ctx->pb, out_path.c_str(), AVIO_FLAG_WRITE); rc < 0) {
    return JoinError(out_path, "cannot create the file", rc);
  }
  // The segments' (the target's) time base as the track's timescale, as Mp4Writer does.
  AVDictionary* mux_options = nullptr;
  if (seg_tb.num == 1) av_dict_set_int(&mux_options, "video_track_timescale", seg_tb.den, 0);
  const int header_rc = avformat_write_header(out.ctx, &mux_options);
  av_dict_free(&mux_options);
  if (header_rc < 0) return JoinError(out_path, "cannot write the MP4 header", header_rc);
  const AVRational out_vtb = out.ctx->streams[vout->index]->time_base;

  std::unique_ptr<AVPacket, void (*)(AVPacket*)> vpkt(av_packet_alloc(), [](AVPacket* p) { av_packet_free(&p); });
  if (vpkt == nullptr) return absl::ResourceExhaustedError("stage 'join': no memory for a packet");
  size_t seg_index = 0;
  bool have_video = false, video_done = false, have_other = false, other_done = false;
  Item other;
  std::unique_ptr<Segment> current = std::move(seg);
  const AVFormatContext* in = packets.demuxer().ctx();
  for (;;) {
    while (!have_video && !video_done) {
      ASSIGN_OR_RETURN(auto got, current->Next(vpkt.get(), segments[seg_index]));
      if (got) {
        have_video = true;
        break;
      }
      if (++seg_index == segments.size()) {
        video_done = true;
        break;
      }
      current.reset();
      ASSIGN_OR_RETURN(current, Segment::Open(segments[seg_index]));
      if (!SameCodec(current->video()->codecpar, first) ||
          av_cmp_q(current->video()->time_base, seg_tb) != 0) {
        return absl::InternalError(absl::StrCat("stage 'join': segment ", segments[seg_index],
                                                " was encoded with other H.264 parameters than the first"));
      }
    }
    while (!have_other && !other_done) {
      ASSIGN_OR_RETURN(auto more, packets.Next(&other));
      if (!more) {
        other_done = true;
      } else if (other.kind == Item::Kind::kPacket && stream_map[other.packet.stream_index()] >= 0) {
        have_other = true;
      }
    }
    if (!have_video && !have_other) break;
    bool take_video = have_video;
    if (have_video && have_other) {
      const AVPacket* o = other.packet.get();
      const int64_t ots = o->dts != AV_NOPTS_VALUE ? o->dts : o->pts;
      const int64_t vts = vpkt->dts != AV_NOPTS_VALUE ? vpkt->dts : vpkt->pts;
      take_video = av_compare_ts(vts, seg_tb, ots, in->streams[o->stream_index]->time_base) <= 0;
    }
    if (take_video) {
      av_packet_rescale_ts(vpkt.get(), seg_tb, out_vtb);
      vpkt->stream_index = vout->index;
      vpkt->pos = -1;
      if (int rc = av_interleaved_write_frame(out.ctx, vpkt.get()); rc < 0) {
        return JoinError(out_path, "cannot write a video packet", rc);
      }
      have_video = false;
    } else {
      AVPacket* p = other.packet.get();
      const int from = p->stream_index, to = stream_map[from];
      av_packet_rescale_ts(p, in->streams[from]->time_base, out.ctx->streams[to]->time_base);
      p->stream_index = to;
      p->pos = -1;
      if (int rc = av_interleaved_write_frame(out.ctx, p); rc < 0) {
        return JoinError(out_path, absl::StrCat("cannot write a packet of stream ", from), rc);
      }
      other.packet = Packet();
      have_other = false;
    }
  }
  if (int rc = av_write_trailer(out.ctx); rc < 0) return JoinError(out_path, "cannot write the MP4 index", rc);
  if (int rc = avio_closep(&out.ctx->pb); rc < 0) return JoinError(out_path, "cannot close the file", rc);
  if (const int err = FsyncPath(out_path, /*directory=*/false); err != 0) {
    return JoinError(out_path, "cannot fsync the file", AVERROR(err));
  }
  return absl::OkStatus();
}

}  // namespace fusion::video
