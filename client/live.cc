#include "live.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "swap.h"
#include "video/mp4_writer.h"
#include "video/video_probe.h"
#include "video/video_reader.h"

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

// Sends every frame of `reader` paced at `fps`, then closes the sending side. *frames: sent.
absl::Status SendAll(video::VideoReader& reader, LiveSession& live, double fps, SentLog& log, uint64_t* frames) {
  const Clock::time_point start = Clock::now();
  video::Item item;
  for (uint64_t seq = 0;;) {
    auto more = reader.Next(&item);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (item.kind != video::Item::Kind::kFrame) continue;
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                              std::chrono::duration<double>(static_cast<double>(seq) / fps)));
    const cv::Mat bgr = item.frame.bgr.isContinuous() ? item.frame.bgr : item.frame.bgr.clone();
    const std::string bytes(reinterpret_cast<const char*>(bgr.data), bgr.total() * 3);
    log.Add(seq, {Clock::now(), item.frame.pts, item.frame.duration});
    if (absl::Status st = live.SendRaw(seq, bytes, bgr.cols, bgr.rows); !st.ok()) return st;
    *frames = ++seq;
  }
  return live.CloseSend();
}

struct Figures {
  uint64_t in = 0, out = 0, dropped = 0;
  bool in_order = true;
  std::vector<double> latency_ms;
};

void Print(const Figures& f, const LiveArgs& args) {
  std::vector<double> l = f.latency_ms;
  std::sort(l.begin(), l.end());
  if (args.json) {
    nlohmann::json j = {{"frames_in", f.in},
                        {"frames_out", f.out},
                        {"frames_dropped", f.dropped},
                        {"in_order", f.in_order},
                        {"latency_ms", {{"p50", Percentile(l, 50)}, {"p95", Percentile(l, 95)}, {"p99", Percentile(l, 99)}}}};
    std::cout << j.dump() << "\n";
    return;
  }
  std::printf("frames in %llu, out %llu, dropped by fusiond %llu; in order: %s\n",
              static_cast<unsigned long long>(f.in), static_cast<unsigned long long>(f.out),
              static_cast<unsigned long long>(f.dropped), f.in_order ? "yes" : "no");
  std::printf("latency ms (send -> result): p50 %.1f, p95 %.1f, p99 %.1f\n", Percentile(l, 50), Percentile(l, 95),
              Percentile(l, 99));
  std::printf("result written to %s\n", args.output.c_str());
}

}  // namespace

void AddLiveOptions(CLI::App* cmd, LiveArgs& args) {
  cmd->add_option("--source", args.source, "image with the face to put in")->required();
  cmd->add_option("--input", args.input, "video file whose frames are sent (MP4, MKV, WebM, ...)")->required();
  cmd->add_option("--output,-o", args.output, "MP4 file for the swapped frames")->required();
  cmd->add_option("--pace", args.pace, "frames per second to send (default: the file's frame rate)")
      ->check(CLI::Range(0.1, 10000.0));
  cmd->add_flag("--json", args.json, "print one JSON object at the end");
  cmd->add_flag("--simple", args.simple, "feathered blend (skip the Poisson blend)");
  cmd->add_option("--keyframe-interval", args.keyframe_interval, "frames between periodic detections (1..300; 0 = 15)");
}

int RunLive(Client& client, const LiveArgs& args) {
  auto source = ReadWhole(args.source);
  auto input = source.ok() ? ReadWhole(args.input) : source;
  if (!input.ok()) {
    std::fprintf(stderr, "fusionctl: live: %s\n", std::string(input.status().message()).c_str());
    return 2;
  }
  auto info = video::ProbeVideo(*input, "input video", 100'000'000, {});
  if (!info.ok()) return Fail(info.status());
  const double fps = args.pace > 0 ? args.pace : (info->fps > 0 ? info->fps : 30);
  auto reader = video::VideoReader::Open(*input, "input video", {});
  if (!reader.ok()) return Fail(reader.status());
  auto writer = video::Mp4Writer::CreateVideoOnly(**reader, args.output, {.crf = 20, .preset = "ultrafast"});
  if (!writer.ok()) return Fail(writer.status());
  SwapOptions options;
  options.simple = args.simple;
  options.keyframe_interval = args.keyframe_interval;
  auto live = client.OpenLive(*source, options);
  if (!live.ok()) return Fail(live.status());

  SentLog log;
  Figures fig;
  absl::Status sent;
  std::thread sender([&] { sent = SendAll(**reader, **live, fps, log, &fig.in); });
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
    if (absl::Status st = (*writer)->WriteFrame({.bgr = bgr, .pts = s.pts, .duration = s.duration, .index = last});
        !st.ok()) {
      received = st;
      (*live)->Cancel();
      break;
    }
  }
  sender.join();
  if (received.ok()) fig.dropped = (*live)->summary().frames_dropped;
  if (!received.ok()) return Fail(received);
  if (!sent.ok()) return Fail(sent);
  if (absl::Status st = (*writer)->Finish(); !st.ok()) return Fail(st);
  Print(fig, args);
  return 0;
}

}  // namespace fusion::ctl
