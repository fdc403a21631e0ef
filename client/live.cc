#include "live.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <functional>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "swap.h"
#include "device_path.h"
#ifdef FUSIONCTL_V4L2
#include "v4l2_io.h"
#endif
#include "video/mp4_writer.h"
#include "video/video_probe.h"
#include "video/video_reader.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace fusion::ctl {
namespace {

using Clock = std::chrono::steady_clock;

absl::StatusOr<std::string> ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Nearest-rank percentile of sorted `v` (0 when empty).
double Percentile(const std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

// What the sender recorded of each frame, by sequence: when it went, its timestamps.
struct Sent {
  Clock::time_point at;
  int64_t pts = 0, duration = 0;
};

class SentLog {
 public:
  void Add(uint64_t seq, Sent s) {
    std::lock_guard<std::mutex> lock(mu_);
    sent_[seq] = s;
  }
  bool Take(uint64_t seq, Sent* out) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = sent_.find(seq);
    if (it == sent_.end()) return false;
    *out = it->second;
    sent_.erase(sent_.begin(), std::next(it));  // older ones were dropped by the daemon
    return true;
  }

 private:
  std::mutex mu_;
  std::map<uint64_t, Sent> sent_;
};

// A frame to send: BGR and its timestamps (the output's: the file's stream time base, or
// microseconds for a device).
struct InFrame {
  cv::Mat bgr;
  int64_t pts = 0, duration = 0;
};

// Where the frames come from (a file's reader, a camera); false at their end.
using NextFrame = std::function<absl::StatusOr<bool>(InFrame*)>;
// Where the swapped frames go (an MP4 file, a v4l2loopback device), and its close.
struct Sink {
  std::function<absl::Status(const cv::Mat& bgr, const Sent& sent, int64_t index)> write;
  std::function<absl::Status()> finish;
};

// Set by SIGINT/SIGTERM while a device is read: the sender stops, the session ends as usual.
std::atomic<bool> g_stop{false};
extern "C" void OnStopSignal(int) { g_stop.store(true); }

// Sends every frame of `next` (paced at `fps` frames/s; 0 = as they come), then closes the
// sending side. *frames: sent.
absl::Status SendAll(const NextFrame& next, LiveSession& live, double fps, SentLog& log, uint64_t* frames) {
  const Clock::time_point start = Clock::now();
  InFrame f;
  for (uint64_t seq = 0; !g_stop.load();) {
    auto more = next(&f);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (fps > 0) {
      std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(static_cast<double>(seq) / fps)));
    }
    const cv::Mat bgr = f.bgr.isContinuous() ? f.bgr : f.bgr.clone();
    const std::string bytes(reinterpret_cast<const char*>(bgr.data), bgr.total() * 3);
    log.Add(seq, {Clock::now(), f.pts, f.duration});
    if (absl::Status st = live.SendRaw(seq, bytes, bgr.cols, bgr.rows); !st.ok()) return st;
    *frames = ++seq;
  }
  return live.CloseSend();
}

// The frames of a file (read whole, as before) or of a V4L2 device, with the size and rate the
// output is made for; *reader keeps a file's reader alive (its MP4 output takes its stream).
// A file's other streams' packets (audio, subtitles) go to `packets` as the sender reads past
// them (null: dropped).
struct Input {
  NextFrame next;
  std::function<absl::Status(video::Packet&)> packets;
  int width = 0, height = 0;
  double fps = 0;  // the rate to send at; 0: as the device gives them
  std::unique_ptr<video::VideoReader> reader;
  bool from_device = false;
  double device_fps = 0;  // a device's nominal rate
#ifdef FUSIONCTL_V4L2
  std::unique_ptr<V4l2Capture> device;
#endif
};

// A device path in a fusionctl built without libavdevice.
[[maybe_unused]] absl::Status NoV4l2(const std::string& role, const std::string& path) {
  return absl::FailedPreconditionError(absl::StrCat(role, " ", path, ": a device, and this fusionctl was built without ",
                                                    "libavdevice (libavdevice-dev): it reads and writes files only"));
}

absl::StatusOr<Input> OpenInput(const LiveArgs& args, std::string* file_bytes) {
  ASSIGN_OR_RETURN(PathKind kind, PathKindOf(args.input, "input"));
  Input in;
  if (kind == PathKind::kDevice) {
#ifndef FUSIONCTL_V4L2
    return NoV4l2("input", args.input);
#else
    if (args.pace > 0) {
      return absl::InvalidArgumentError("--pace does not apply to a device input (its frames are sent as it gives them)");
    }
    ASSIGN_OR_RETURN(in.device, V4l2Capture::Open(args.input));
    in.from_device = true;
    in.device_fps = in.device->fps();
    in.width = in.device->width();
    in.height = in.device->height();
    V4l2Capture* device = in.device.get();
    in.next = [device](InFrame* f) -> absl::StatusOr<bool> {
      int64_t us = 0;
      ASSIGN_OR_RETURN(bool more, device->Next(&f->bgr, &us));
      f->pts = us;
      f->duration = 0;
      return more;
    };
    return in;
#endif
  }
  ASSIGN_OR_RETURN(*file_bytes, ReadWhole(args.input));
  return in;
}

struct Figures {
  uint64_t in = 0, out = 0, dropped = 0;
  bool in_order = true;
  std::vector<double> latency_ms;
};

// The figures; with --json one object on stdout, with "error" (code, message, stage) when the
// session failed (the figures then are those until it did).
void Print(const Figures& f, const LiveArgs& args, const absl::Status& error = absl::OkStatus()) {
  std::vector<double> l = f.latency_ms;
  std::sort(l.begin(), l.end());
  if (args.json) {
    nlohmann::json j = {{"frames_in", f.in},
                        {"frames_out", f.out},
                        {"frames_dropped", f.dropped},
                        {"in_order", f.in_order},
                        {"latency_ms", {{"p50", Percentile(l, 50)}, {"p95", Percentile(l, 95)}, {"p99", Percentile(l, 99)}}}};
    if (!error.ok()) {
      j["error"] = {{"code", absl::StatusCodeToString(error.code())},
                    {"message", std::string(error.message())},
                    {"stage", ErrorStage(error)}};
    }
    std::cout << j.dump() << "\n";
    return;
  }
  if (!error.ok()) return;  // Fail's line on stderr says it
  std::printf("frames in %llu, out %llu, dropped by fusiond %llu; in order: %s\n",
              static_cast<unsigned long long>(f.in), static_cast<unsigned long long>(f.out),
              static_cast<unsigned long long>(f.dropped), f.in_order ? "yes" : "no");
  std::printf("latency ms (send -> result): p50 %.1f, p95 %.1f, p99 %.1f\n", Percentile(l, 50), Percentile(l, 95),
              Percentile(l, 99));
  std::printf("result written to %s\n", args.output.c_str());
}

// The file the MP4 is written to until it is complete: beside `output` (the same filesystem,
// so the rename is atomic), hidden, named for this process. An existing `output` is untouched
// until then.
std::string PartPath(const std::string& output) {
  const std::filesystem::path out(output);
  const std::string dir = out.has_parent_path() ? out.parent_path().string() : ".";
  return absl::StrCat(dir, "/.", out.filename().string(), ".fusionctl-", getpid(), ".part");
}

// OK when files can be made in the output's directory; FAILED_PRECONDITION naming it otherwise.
absl::Status CheckOutputDir(const std::string& output) {
  const std::filesystem::path out(output);
  const std::string dir = out.has_parent_path() ? out.parent_path().string() : ".";
  if (access(dir.c_str(), W_OK | X_OK) == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("output ", output, ": cannot write in ", dir, " (", std::strerror(errno), ")"));
}

}  // namespace

void AddLiveOptions(CLI::App* cmd, LiveArgs& args) {
  cmd->add_option("--source", args.source, "image with the face to put in")->required();
  cmd->add_option("--input", args.input,
                  "video file whose frames are sent (MP4, MKV, WebM, ...), or a V4L2 camera (/dev/videoN)")
      ->required();
  cmd->add_option("--output,-o", args.output,
                  "MP4 file for the swapped frames (and the input file's audio), or a v4l2loopback device (/dev/videoN)")
      ->required();
  cmd->add_option("--pace", args.pace, "frames per second to send (default: the file's frame rate; not for a device)")
      ->check(CLI::Range(0.1, 10000.0));
  cmd->add_flag("--json", args.json, "print one JSON object at the end");
  cmd->add_flag("--simple", args.simple, "feathered blend (skip the Poisson blend)");
  cmd->add_option("--keyframe-interval", args.keyframe_interval, "frames between periodic detections (1..300; 0 = 15)");
}

int RunLive(Client& client, const LiveArgs& args) {
  // The video library's log (FFmpeg's words at info) is the daemon's business; here warnings go
  // to stderr, never to stdout (--json's).
  spdlog::set_default_logger(spdlog::stderr_color_mt("fusionctl"));
  spdlog::set_level(spdlog::level::warn);
  auto source = ReadWhole(args.source);
  if (!source.ok()) {
    std::fprintf(stderr, "fusionctl: live: %s\n", std::string(source.status().message()).c_str());
    return 2;
  }
  // The input: a V4L2 device (a character device) or a video file.
  std::string file;
  auto input = OpenInput(args, &file);
  if (!input.ok()) {
    std::fprintf(stderr, "fusionctl: live: %s\n", std::string(input.status().message()).c_str());
    return 2;
  }
  double fps = 0;
  if (!input->from_device) {
    auto info = video::ProbeVideo(file, "input video", 100'000'000, {});
    if (!info.ok()) return Fail(info.status());
    fps = args.pace > 0 ? args.pace : (info->fps > 0 ? info->fps : 30);
    auto reader = video::VideoReader::Open(file, "input video", {});
    if (!reader.ok()) return Fail(reader.status());
    input->reader = *std::move(reader);
    input->width = input->reader->width();
    input->height = input->reader->height();
    video::VideoReader* r = input->reader.get();
    input->next = [r, in = &*input](InFrame* f) -> absl::StatusOr<bool> {
      video::Item item;
      for (;;) {
        ASSIGN_OR_RETURN(bool more, r->Next(&item));
        if (!more) return false;
        if (item.kind != video::Item::Kind::kFrame) {
          if (in->packets) RETURN_IF_ERROR(in->packets(item.packet));
          continue;
        }
        *f = {item.frame.bgr, item.frame.pts, item.frame.duration};
        return true;
      }
    };
  }
  // The output: a v4l2loopback device (a character device) or an MP4 file.
  auto output_kind = PathKindOf(args.output, "output");
  if (!output_kind.ok()) {
    std::fprintf(stderr, "fusionctl: live: %s\n", std::string(output_kind.status().message()).c_str());
    return 2;
  }
  Sink sink;
  std::mutex mp4_mu;
  std::string part;  // an MP4 output's file until it is complete
  // Until it is renamed into place: closed and removed (no frame came back, or an error).
  std::unique_ptr<video::Mp4Writer> mp4;
  absl::Cleanup remove_part = [&] {
    if (part.empty()) return;
    mp4.reset();
    std::remove(part.c_str());
  };
#ifdef FUSIONCTL_V4L2
  std::unique_ptr<V4l2Output> loopback;
#endif
  if (*output_kind == PathKind::kDevice) {
#ifndef FUSIONCTL_V4L2
    std::fprintf(stderr, "fusionctl: live: %s\n", std::string(NoV4l2("output", args.output).message()).c_str());
    return 2;
#else
    const double out_fps = fps > 0 ? fps : input->device_fps;
    auto opened = V4l2Output::Open(args.output, input->width, input->height, out_fps);
    if (!opened.ok()) {
      std::fprintf(stderr, "fusionctl: live: %s\n", std::string(opened.status().message()).c_str());
      return 2;
    }
    loopback = *std::move(opened);
    sink = {[o = loopback.get()](const cv::Mat& bgr, const Sent&, int64_t) { return o->Write(bgr); },
            [o = loopback.get()] { return o->Finish(); }};
#endif
  } else {
    if (absl::Status dir = CheckOutputDir(args.output); !dir.ok()) {
      std::fprintf(stderr, "fusionctl: live: %s\n", std::string(dir.message()).c_str());
      return 2;
    }
    part = PartPath(args.output);
    const video::EncodeOptions encode{.crf = 20, .preset = "ultrafast"};
    const double device_fps = input->device_fps;
    std::vector<std::string> dropped_streams;  // streams MP4 cannot carry as they are
    auto writer = input->reader != nullptr
                      ? video::Mp4Writer::Create(*input->reader, part, encode, &dropped_streams)
                      : video::Mp4Writer::CreateVideoOnly(
                            video::VideoShape{.width = input->width, .height = input->height, .time_base_num = 1,
                                              .time_base_den = 1000000,
                                              .fps_num = static_cast<int>(std::lround(device_fps * 1000)),
                                              .fps_den = 1000},
                            part, encode);
    if (!writer.ok()) return Fail(writer.status());
    mp4 = *std::move(writer);
    for (const std::string& d : dropped_streams) std::fprintf(stderr, "fusionctl: live: %s\n", d.c_str());
    // The sender's thread copies the other streams' packets, the receiver's writes the frames:
    // one writer, one at a time (the muxer interleaves them by time).
    sink = {[w = mp4.get(), &mp4_mu](const cv::Mat& bgr, const Sent& s, int64_t index) {
              std::lock_guard<std::mutex> lock(mp4_mu);
              return w->WriteFrame({.bgr = bgr, .pts = s.pts, .duration = s.duration, .index = index});
            },
            [w = mp4.get(), &mp4_mu] {
              std::lock_guard<std::mutex> lock(mp4_mu);
              return w->Finish();
            }};
    input->packets = [w = mp4.get(), &mp4_mu](video::Packet& p) {
      std::lock_guard<std::mutex> lock(mp4_mu);
      return w->WritePacket(p);
    };
  }
  SwapOptions options;
  options.simple = args.simple;
  options.keyframe_interval = args.keyframe_interval;
  Figures fig;
  auto live = client.OpenLive(*source, options);
  if (!live.ok()) {
    Print(fig, args, live.status());
    return Fail(live.status());
  }

  // A camera runs until it is stopped: Ctrl-C (or SIGTERM) ends the session and closes the output.
  struct sigaction previous_int {}, previous_term {};
  if (input->from_device) {
    struct sigaction stop {};
    stop.sa_handler = OnStopSignal;
    sigemptyset(&stop.sa_mask);
    sigaction(SIGINT, &stop, &previous_int);
    sigaction(SIGTERM, &stop, &previous_term);
  }
  SentLog log;
  absl::Status sent;
  std::thread sender([&] { sent = SendAll(input->next, **live, fps, log, &fig.in); });
  absl::Status received;
  int64_t last = -1;
  for (;;) {
    auto r = (*live)->Receive();
    if (!r.ok() || !r->has_value()) {
      received = r.status();
      break;
    }
    const LiveFrameResult& f = **r;
    Sent s;
    const bool known = log.Take(f.sequence, &s);  // false: it came after a later frame
    if (!known || static_cast<int64_t>(f.sequence) <= last) fig.in_order = false;
    last = static_cast<int64_t>(f.sequence);
    if (known) fig.latency_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - s.at).count());
    fig.dropped = f.frames_dropped;
    ++fig.out;
    cv::Mat bgr(static_cast<int>(f.height), static_cast<int>(f.width), CV_8UC3, const_cast<char*>(f.image.data()));
    if (absl::Status st = sink.write(bgr, s, last); !st.ok()) {
      received = st;
      (*live)->Cancel();
      break;
    }
  }
  sender.join();
  if (input->from_device) {
    sigaction(SIGINT, &previous_int, nullptr);
    sigaction(SIGTERM, &previous_term, nullptr);
  }
  if (received.ok()) fig.dropped = (*live)->summary().frames_dropped;
  absl::Status error = !received.ok() ? received : sent;
  // The frames that came back are kept, an error or not: the output is closed (a playable file)
  // and put in place; with none, an existing output is left as it was.
  if (error.ok() || fig.out > 0) {
    if (absl::Status st = sink.finish(); !st.ok() && error.ok()) error = st;
    if (!part.empty() && std::rename(part.c_str(), args.output.c_str()) == 0) {
      part.clear();
    } else if (!part.empty() && error.ok()) {
      error = absl::InternalError(absl::StrCat("cannot rename ", part, " to ", args.output, ": ", std::strerror(errno)));
    }
  }
  if (!error.ok()) {
    Print(fig, args, error);
    if (fig.out > 0 && part.empty() && !args.json) {
      std::fprintf(stderr, "fusionctl: live: the %llu frames swapped before it are in %s\n",
                   static_cast<unsigned long long>(fig.out), args.output.c_str());
    }
    return Fail(error);
  }
  Print(fig, args);
  return 0;
}

}  // namespace fusion::ctl
