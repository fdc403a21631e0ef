#include "video/av_input.h"

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstring>
#include <mutex>

extern "C" {
#include <libavutil/display.h>
#include <libavutil/error.h>
#include <libavutil/mem.h>
}

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "base/status_macros.h"

namespace fusion::video::internal {

int UprightRotation(const AVStream* stream) {
  size_t size = 0;
  const uint8_t* m = av_stream_get_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, &size);
  if (m == nullptr || size < 9 * sizeof(int32_t)) return 0;
  // av_display_rotation_get: the counter-clockwise angle of the matrix; players turn the frame
  // clockwise by it (FFmpeg's own autorotate: theta = -angle).
  const double angle = av_display_rotation_get(reinterpret_cast<const int32_t*>(m));
  if (std::isnan(angle)) return 0;
  const long quarter = std::lround(-angle / 90.0);
  return static_cast<int>(((quarter % 4) + 4) % 4) * 90;
}

namespace {

constexpr int kAvioBuffer = 64 * 1024;

// "audio aac, subtitle mov_text": what a file without a video stream holds, for the message.
std::string StreamList(const AVFormatContext* fmt) {
  std::vector<std::string> parts;
  for (unsigned i = 0; i < fmt->nb_streams; ++i) {
    const AVCodecParameters* p = fmt->streams[i]->codecpar;
    const char* type = av_get_media_type_string(p->codec_type);
    parts.push_back(absl::StrCat(type != nullptr ? type : "unknown", " ", avcodec_get_name(p->codec_id)));
  }
  return parts.empty() ? "no streams" : absl::StrJoin(parts, ", ");
}

}  // namespace

bool Mp4Carries(AVCodecID codec) {
  switch (codec) {
    case AV_CODEC_ID_AAC:
    case AV_CODEC_ID_MP3:
    case AV_CODEC_ID_MP2:
    case AV_CODEC_ID_AC3:
    case AV_CODEC_ID_EAC3:
    case AV_CODEC_ID_OPUS:
    case AV_CODEC_ID_FLAC:
    case AV_CODEC_ID_ALAC:
    case AV_CODEC_ID_MOV_TEXT:
      return true;
    default:
      return false;
  }
}

absl::Status AddCopiedStreams(const MemoryDemuxer& demuxer, AVFormatContext* out, std::vector<int>* stream_map,
                              std::vector<std::string>* degradations) {
  const AVFormatContext* in = demuxer.ctx();
  stream_map->assign(in->nb_streams, -1);
  for (unsigned i = 0; i < in->nb_streams; ++i) {
    if (static_cast<int>(i) == demuxer.video_index()) continue;
    const AVStream* s = in->streams[i];
    const AVMediaType type = s->codecpar->codec_type;
    if (type == AVMEDIA_TYPE_VIDEO && (s->disposition & AV_DISPOSITION_ATTACHED_PIC)) continue;
    const char* type_name = av_get_media_type_string(type);
    if (!Mp4Carries(s->codecpar->codec_id)) {
      degradations->push_back(absl::StrCat(type_name != nullptr ? type_name : "unknown", " stream ", i, " (",
                                           avcodec_get_name(s->codecpar->codec_id),
                                           "): dropped, MP4 cannot carry it unchanged"));
      continue;
    }
    AVStream* o = avformat_new_stream(out, nullptr);
    if (o == nullptr) return absl::ResourceExhaustedError("stage 'encode': no memory for a stream");
    avcodec_parameters_copy(o->codecpar, s->codecpar);
    o->codecpar->codec_tag = 0;
    o->time_base = s->time_base;
    o->disposition = s->disposition;
    av_dict_copy(&o->metadata, s->metadata, 0);
    (*stream_map)[i] = o->index;
  }
  return absl::OkStatus();
}

namespace {

void LogLine(void* avcl, int level, const char* fmt, va_list args) {
  if (level > AV_LOG_WARNING) return;  // info/verbose/debug: FFmpeg's chatter
  char line[1024];
  int prefix = 1;
  av_log_format_line2(avcl, level, fmt, args, line, sizeof line, &prefix);
  std::string text(line);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  spdlog::debug("ffmpeg: {}", text);
}

}  // namespace

void RouteFfmpegLog() {
  static std::once_flag once;
  std::call_once(once, [] { av_log_set_callback(&LogLine); });
}

std::string AvErrorText(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  if (av_strerror(err, buf, sizeof buf) < 0) return absl::StrCat("error ", err);
  return buf;
}

absl::Status AvError(absl::StatusCode code, absl::string_view what, absl::string_view doing, int err) {
  spdlog::info("{}: {} (FFmpeg: {})", std::string(what), std::string(doing), AvErrorText(err));
  return absl::Status(code, absl::StrCat(what, ": ", doing));
}

absl::Status CheckFrameSize(const std::string& what, int width, int height, uint64_t max_pixels) {
  if (width <= 0 || height <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the video stream declares no frame size (", width,
                                                   "x", height, ")"));
  }
  const uint64_t pixels = static_cast<uint64_t>(width) * static_cast<uint64_t>(height);
  if (pixels > max_pixels) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", width, "x", height, " frames (", pixels,
                                                   " pixels) exceed the limit of ", max_pixels,
                                                   " pixels (max_pixels)"));
  }
  return absl::OkStatus();
}

int MemoryDemuxer::Read(void* opaque, uint8_t* buf, int n) {
  auto* c = static_cast<Cursor*>(opaque);
  if (c->pos >= c->size) return AVERROR_EOF;
  const uint64_t len = std::min<uint64_t>(static_cast<uint64_t>(n), c->size - c->pos);
  std::memcpy(buf, c->data + c->pos, len);
  c->pos += len;
  return static_cast<int>(len);
}

int64_t MemoryDemuxer::Seek(void* opaque, int64_t offset, int whence) {
  auto* c = static_cast<Cursor*>(opaque);
  int64_t base = 0;
  switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE: return static_cast<int64_t>(c->size);
    case SEEK_SET: base = 0; break;
    case SEEK_CUR: base = static_cast<int64_t>(c->pos); break;
    case SEEK_END: base = static_cast<int64_t>(c->size); break;
    default: return AVERROR(EINVAL);
  }
  const int64_t to = base + offset;
  if (to < 0 || to > static_cast<int64_t>(c->size)) return AVERROR(EINVAL);
  c->pos = static_cast<uint64_t>(to);
  return to;
}

MemoryDemuxer::~MemoryDemuxer() {
  avformat_close_input(&fmt_);  // a custom pb is not freed by it
  if (avio_ != nullptr) {
    av_freep(&avio_->buffer);
    avio_context_free(&avio_);
  }
}

absl::StatusOr<std::unique_ptr<MemoryDemuxer>> MemoryDemuxer::Open(absl::string_view bytes, const std::string& what,
                                                                  uint64_t max_pixels) {
  RouteFfmpegLog();
  std::unique_ptr<MemoryDemuxer> d(new MemoryDemuxer());
  d->what_ = what;
  d->cursor_ = {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0};
  if (bytes.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": empty"));
  auto* buffer = static_cast<uint8_t*>(av_malloc(kAvioBuffer));
  if (buffer == nullptr) return absl::ResourceExhaustedError(absl::StrCat(what, ": no memory for the demuxer"));
  d->avio_ = avio_alloc_context(buffer, kAvioBuffer, 0, &d->cursor_, &Read, nullptr, &Seek);
  if (d->avio_ == nullptr) {
    av_free(buffer);
    return absl::ResourceExhaustedError(absl::StrCat(what, ": no memory for the demuxer"));
  }
  d->fmt_ = avformat_alloc_context();
  if (d->fmt_ == nullptr) return absl::ResourceExhaustedError(absl::StrCat(what, ": no memory for the demuxer"));
  d->fmt_->pb = d->avio_;
  d->fmt_->flags |= AVFMT_FLAG_CUSTOM_IO;
  AVDictionary* opts = nullptr;
  av_dict_set(&opts, "format_whitelist", kFormatWhitelist, 0);
  av_dict_set(&opts, "protocol_whitelist", "none", 0);  // nothing beyond our AVIO
  int rc = avformat_open_input(&d->fmt_, nullptr, nullptr, &opts);
  av_dict_free(&opts);
  if (rc < 0) {  // avformat_open_input frees the context on failure
    d->fmt_ = nullptr;
    return AvError(absl::StatusCode::kInvalidArgument, what,
                   "not a video fusiond reads (MP4, MOV, MKV, WebM, AVI containers), or its header is damaged or cut off",
                   rc);
  }
  // Sizes the container declares, before any decoder sees a frame.
  for (unsigned i = 0; i < d->fmt_->nb_streams; ++i) {
    const AVCodecParameters* p = d->fmt_->streams[i]->codecpar;
    if (p->codec_type != AVMEDIA_TYPE_VIDEO || (p->width == 0 && p->height == 0)) continue;
    RETURN_IF_ERROR(CheckFrameSize(what, p->width, p->height, max_pixels));
  }
  std::vector<AVDictionary*> stream_opts(d->fmt_->nb_streams, nullptr);
  for (AVDictionary*& o : stream_opts) av_dict_set_int(&o, "max_pixels", static_cast<int64_t>(max_pixels), 0);
  rc = avformat_find_stream_info(d->fmt_, stream_opts.empty() ? nullptr : stream_opts.data());
  for (AVDictionary*& o : stream_opts) av_dict_free(&o);
  if (rc < 0) return AvError(absl::StatusCode::kInvalidArgument, what, "cannot read the stream headers", rc);
  d->video_index_ = av_find_best_stream(d->fmt_, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  if (d->video_index_ < 0 ||
      (d->fmt_->streams[d->video_index_]->disposition & AV_DISPOSITION_ATTACHED_PIC) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": no video stream (the file holds ", StreamList(d->fmt_), ")"));
  }
  const AVCodecParameters* v = d->video()->codecpar;
  RETURN_IF_ERROR(CheckFrameSize(what, v->width, v->height, max_pixels));
  if (avcodec_find_decoder(v->codec_id) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": no decoder for its video codec '",
                                                   avcodec_get_name(v->codec_id), "'"));
  }
  return d;
}

}  // namespace fusion::video::internal
