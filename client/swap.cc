#include "swap.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "format.h"
#include "base/status_macros.h"

namespace fusion::ctl {
namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": '", path, "' is a directory"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    return absl::InvalidArgumentError(absl::StrCat(what, ": cannot read '", path, "': ", std::strerror(err)));
  }
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// An image target's result: --format, or OUT's extension when it is not given (no extension:
// PNG); an extension that contradicts --format is an error, and so is one that is neither
// (x.mp4, x.gif) when the target is known to be an image (`image_target`: LooksLikeImage).
absl::StatusOr<OutputFormat> OutputFormatFor(const std::string& flag, const std::string& output, bool image_target) {
  const std::string ext = absl::AsciiStrToLower(std::filesystem::path(output).extension().string());
  const bool jpeg_ext = ext == ".jpg" || ext == ".jpeg", png_ext = ext == ".png";
  if (image_target && !ext.empty() && !jpeg_ext && !png_ext) {
    return absl::InvalidArgumentError(absl::StrCat("-o '", output, "': the target is an image, so the result is PNG or ",
                                                   "JPEG: name it .png, .jpg or .jpeg"));
  }
  if (flag.empty()) return jpeg_ext ? OutputFormat::kJpeg : OutputFormat::kPng;
  if ((flag == "png" && jpeg_ext) || (flag == "jpeg" && png_ext)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--format ", flag, " does not match the extension of '", output, "'"));
  }
  return flag == "jpeg" ? OutputFormat::kJpeg : OutputFormat::kPng;
}

// OUT's directory must exist and be writable before a job is spent on it.
absl::Status CheckWritable(const std::string& output) {
  std::error_code ec;
  if (std::filesystem::is_directory(output, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("-o: '", output, "' is a directory"));
  }
  if (std::filesystem::exists(output, ec) && access(output.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("-o: cannot write '", output, "': ", std::strerror(errno)));
  }
  std::filesystem::path dir = std::filesystem::path(output).parent_path();
  if (dir.empty()) dir = ".";
  if (access(dir.c_str(), W_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("-o: cannot write into '", dir.string(), "': ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Whether the target starts like a video container fusiond reads: ISO BMFF/QuickTime ('ftyp',
// or a first 'moov'/'mdat'/'wide'/'free' atom), EBML (MKV, WebM), RIFF AVI, YUV4MPEG2 — the
// same first look as the daemon's video::LooksLikeVideoContainer (daemon/video/video_probe.h),
// which decides with FFmpeg's probe. Anything else is sent as an image target (the daemon's
// error then names what it is not).
bool LooksLikeVideo(const std::string& b) {
  auto at = [&](size_t pos, const char* m, size_t n) { return b.size() >= pos + n && b.compare(pos, n, m, n) == 0; };
  for (const char* atom : {"ftyp", "moov", "mdat", "wide", "free"}) {
    if (at(4, atom, 4)) return true;
  }
  return at(0, "\x1a\x45\xdf\xa3", 4) || (at(0, "RIFF", 4) && at(8, "AVI ", 4)) || at(0, "YUV4MPEG2", 9);
}

// Whether the target starts like an image format fusiond decodes (PNG, JPEG, WebP, TIFF, BMP).
// Anything else that is no video (LooksLikeVideo) goes to the daemon, which names what it is not.
bool LooksLikeImage(const std::string& b) {
  auto at = [&](size_t pos, const char* m, size_t n) { return b.size() >= pos + n && b.compare(pos, n, m, n) == 0; };
  return at(0, "\x89PNG", 4) || at(0, "\xff\xd8\xff", 3) || (at(0, "RIFF", 4) && at(8, "WEBP", 4)) ||
         at(0, "II*\0", 4) || at(0, "MM\0*", 4) || at(0, "BM", 2);
}

// A video target's usage rules: OUT ends in .mp4; --format and --upscale do not apply, nor
// --keyframe-interval with --video-detect every-frame.
absl::Status CheckVideoArgs(const SwapArgs& a) {
  const std::string ext = absl::AsciiStrToLower(std::filesystem::path(a.output).extension().string());
  if (!a.output.empty() && ext != ".mp4") {
    return absl::InvalidArgumentError(absl::StrCat("the target '", a.target, "' is a video: -o must end in .mp4 (got '",
                                                   a.output, "')"));
  }
  if (!a.format.empty()) return absl::InvalidArgumentError("--format applies to image targets; a video result is MP4");
  if (!a.upscale.empty()) return absl::InvalidArgumentError("--upscale applies to image targets only");
  if (a.video_detect == "every-frame" && a.keyframe_interval != 0) {
    return absl::InvalidArgumentError("--keyframe-interval applies to --video-detect track only");
  }
  return absl::OkStatus();
}

absl::StatusOr<SwapOptions> ToOptions(const SwapArgs& a, bool video, bool image) {
  SwapOptions o;
  o.ratio = a.ratio;
  if (a.enhance == "x2") o.enhance_scale = 2;
  else if (a.enhance == "x4") o.enhance_scale = 4;
  if (a.upscale == "x2") o.upscale = 2;
  else if (a.upscale == "x4") o.upscale = 4;
  if (a.faces == "largest") {
    o.faces = FaceSelection::kLargest;
  } else if (a.faces.rfind("reference:", 0) == 0) {
    o.faces = FaceSelection::kReference;
    ASSIGN_OR_RETURN(o.reference_image, ReadFile(a.faces.substr(10), "--faces reference"));
  } else if (a.faces != "all") {
    return absl::InvalidArgumentError("--faces: expected all, largest or reference:IMG");
  }
  o.max_side = a.max_side;
  o.low_vram = a.low_vram;
  o.min_face_px = a.min_face_px;
  o.min_face_score = a.min_face_score;
  o.simple = a.simple;
  if (!video) {  // a video's result is MP4 (CheckVideoArgs)
    auto format = OutputFormatFor(a.format, a.output, image);
    if (!format.ok()) return format.status();
    o.format = *format;
  }
  o.priority = a.priority == "low" ? Priority::kLow : a.priority == "high" ? Priority::kHigh
                                                                           : Priority::kNormal;
  o.start_seconds = a.start;
  o.duration_seconds = a.duration;
  o.video_crf = a.crf;
  o.video_preset = a.preset;
  o.video_detect = a.video_detect == "every-frame" ? VideoDetect::kEveryFrame : VideoDetect::kTrack;
  o.keyframe_interval = a.keyframe_interval;
  return o;
}

// Progress on stderr: a redrawn bar on a terminal, one plain line per event otherwise.
void ShowEvent(const JobEvent& e, bool tty) {
  std::string line;
  switch (e.kind) {
    case JobEvent::Kind::kQueued:
      line = absl::StrCat("queued, position ", e.queue_position);
      break;
    case JobEvent::Kind::kStageStarted:
      line = e.stage.empty() ? "running" : absl::StrCat("stage ", e.stage, " started");
      break;
    case JobEvent::Kind::kStageFinished:
      line = absl::StrCat("stage ", e.stage, " done in ", static_cast<int64_t>(e.report.ms),
                          " ms (", e.report.mode, ")");
      break;
    case JobEvent::Kind::kDegradation:
      line = absl::StrCat("degraded: ", e.degradation);
      break;
    case JobEvent::Kind::kDone:
      line = absl::StrCat("job ", ToString(e.job.state));
      break;
    case JobEvent::Kind::kFrames:
      line = absl::StrFormat("frame %d of %d, %.1f fps", e.frames_done, e.frames_total, e.frames_per_second);
      break;
  }
  const int percent = static_cast<int>(100 * (e.kind == JobEvent::Kind::kDone ? 1.0f : e.progress));
  if (tty) {
    const int filled = percent / 5;
    std::fprintf(stderr, "\r[%-20s] %3d%% %-50s", std::string(filled, '#').c_str(), percent,
                 line.c_str());
    if (e.kind == JobEvent::Kind::kDone) std::fputc('\n', stderr);
  } else {
    std::fprintf(stderr, "%3d%% %s\n", percent, line.c_str());
  }
}

}  // namespace

// A bad argument found before anything was submitted: exit 2, like CLI11's usage errors.
static int Usage(const absl::Status& status) {
  std::fprintf(stderr, "fusionctl: swap: %s\n", std::string(status.message()).c_str());
  return 2;
}

int Fail(const absl::Status& status) {
  if (absl::IsUnavailable(status)) {
    std::fprintf(stderr, "fusionctl: %s\n", std::string(status.message()).c_str());
    return 2;
  }
  // CODE: message, as absl's ToString() without its payloads (the stage is for --json).
  std::fprintf(stderr, "fusionctl: %s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  return 1;
}

// swap --json on a job that did not succeed (or was refused at submit): the error as a JSON
// object on stdout, so a script reading stdout sees why; the exit code stays Fail's.
// `message`: the job's error message (stderr gets Fail's line for `status`).
static int FailJson(const absl::Status& status, const std::string& message, const std::string& job_id,
                    const std::string& state, const std::string& stage, const std::vector<std::string>& degradations) {
  nlohmann::json j = {{"job_id", job_id},
                      {"state", state},
                      {"error", {{"code", absl::StatusCodeToString(status.code())},
                                 {"message", message},
                                 {"stage", stage}}},
                      {"degradations", degradations}};
  std::cout << j.dump(2) << "\n";
  return Fail(status);
}

void AddSwapOptions(CLI::App* cmd, SwapArgs& a) {
  cmd->add_option("--source", a.source, "image with the face to use")->required();
  cmd->add_option("--target", a.target,
                  "image or video whose faces are replaced (the kind comes from its content; a video: "
                  "MP4/MOV, MKV/WebM, AVI)")
      ->required();
  cmd->add_option("-o,--output", a.output, "where to write the result (a video's: an .mp4 file)");
  cmd->add_option("--start", a.start, "video: first frame's time, seconds (default 0)")->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--duration", a.duration, "video: seconds of video from --start (default: to the end)")
      ->check(CLI::Range(0.0, 1e7));
  cmd->add_option("--crf", a.crf, "video: x264 constant rate factor 1..51, lower = better and larger (default 18)")
      ->check(CLI::Range(1u, 51u));
  cmd->add_option("--preset", a.preset, "video: x264 preset ultrafast..veryslow (default veryfast)")
      ->check(CLI::IsMember({"ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower",
                             "veryslow"}));
  cmd->add_option("--video-detect", a.video_detect,
                  "video: track (detect on keyframes, track faces between them; default) | every-frame")
      ->check(CLI::IsMember({"track", "every-frame"}));
  cmd->add_option("--keyframe-interval", a.keyframe_interval,
                  "video, track: frames between periodic keyframes 1..300 (default 15)")
      ->check(CLI::Range(1u, 300u));
  cmd->add_option("--ratio", a.ratio, "0 keeps the target face, 1 the source identity")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--enhance", a.enhance, "face super-resolution")->check(CLI::IsMember({"none", "x2", "x4"}));
  cmd->add_option("--upscale", a.upscale, "whole-frame upscale of the output")->check(CLI::IsMember({"x2", "x4"}));
  cmd->add_option("--faces", a.faces, "all | largest | reference:IMG");
  auto* max_side = cmd->add_option("--max-side", a.max_side,
                                   "cap on one detection pass's network input, pixels (any value: rounded down to x32 and clamped to "
                                   "416..1024; default 1024); "
                                   "a memory lever: it does not change which faces are found");
  cmd->add_flag("--low-vram", a.low_vram, "small-card profile (detection passes of at most 640 px)")->excludes(max_side);
  cmd->add_option("--min-face-px", a.min_face_px,
                  "smallest face width to find, target pixels (8..100000; default: the daemon's, 40)")
      ->check(CLI::Range(8u, 100000u));
  cmd->add_option("--min-face-score", a.min_face_score, "detector score threshold in (0,1) (default: the daemon's)")
      ->check(CLI::Validator(
          [](const std::string& v) {
            try {
              const double d = std::stod(v);
              return d > 0 && d < 1 ? std::string() : std::string("must be in (0,1), both ends excluded");
            } catch (const std::exception&) {
              return std::string("must be a number in (0,1)");
            }
          },
          "FLOAT in (0,1)"));
  cmd->add_flag("--simple", a.simple,
                "blend by feathering on the device instead of colour correction + Poisson on the host");
  cmd->add_option("--format", a.format, "png | jpeg")->check(CLI::IsMember({"png", "jpeg"}));
  cmd->add_option("--priority", a.priority, "low | normal | high")->check(CLI::IsMember({"low", "normal", "high"}));
  cmd->add_flag("--json", a.json, "print the job result as JSON");
  cmd->add_flag("--no-wait", a.no_wait, "print the job id and return once it is queued (no -o: `fusionctl result` fetches the image)");
}

int RunSwap(Client& client, const SwapArgs& a) {
  if (!a.no_wait && a.output.empty()) {
    std::fprintf(stderr, "fusionctl: swap: -o OUT is required unless --no-wait\n");
    return 2;
  }
  if (a.no_wait && !a.output.empty()) {
    // Nothing would write OUT: the command returns once the job is queued.
    std::fprintf(stderr,
                 "fusionctl: swap: -o OUT is not written with --no-wait; fetch the image later with "
                 "`fusionctl result JOB_ID -o OUT`\n");
    return 2;
  }
  // An input that cannot be read is a usage error (exit 2), like --faces reference:IMG.
  auto source = ReadFile(a.source, "--source");
  if (!source.ok()) return Usage(source.status());
  auto target = ReadFile(a.target, "--target");
  if (!target.ok()) return Usage(target.status());
  const bool video = LooksLikeVideo(*target);
  if (video) {
    if (absl::Status st = CheckVideoArgs(a); !st.ok()) return Usage(st);
  } else if (a.start != 0 || a.duration != 0 || a.crf != 0 || !a.preset.empty() || !a.video_detect.empty() ||
             a.keyframe_interval != 0) {
    return Usage(absl::InvalidArgumentError(
        "--start, --duration, --crf, --preset, --video-detect and --keyframe-interval apply to video targets only"));
  }
  auto options = ToOptions(a, video, !video && LooksLikeImage(*target));
  if (!options.ok()) return Usage(options.status());
  if (!a.output.empty()) {
    if (absl::Status st = CheckWritable(a.output); !st.ok()) return Usage(st);
  }
  auto job = client.SubmitJob(*source, *target, *options);
  if (!job.ok()) {
    // Refused at submit: the stage the daemon names ("decode" for an image's own fault), else "submit".
    const std::string stage = ErrorStage(job.status());
    return a.json ? FailJson(job.status(), std::string(job.status().message()), "", "NOT_SUBMITTED",
                             stage.empty() ? "submit" : stage, {})
                  : Fail(job.status());
  }
  if (a.no_wait) {
    std::cout << (a.json ? JobToJson(*job).dump(2) : job->job_id) << "\n";
    return 0;
  }
  const bool tty = isatty(STDERR_FILENO) != 0;
  std::fprintf(stderr, "job %s submitted\n", job->job_id.c_str());  // to find it again if we lose the daemon
  JobInfo final_job;
  std::string stage;  // the stage last started ("detect", without its " (...)" note)
  std::vector<std::string> degradations;
  absl::Status watched = client.WatchJob(job->job_id, [&](const JobEvent& e) {
    ShowEvent(e, tty);
    if (e.kind == JobEvent::Kind::kStageStarted) stage = e.stage.substr(0, e.stage.find(" ("));
    if (e.kind == JobEvent::Kind::kDegradation) degradations.push_back(e.degradation);
    if (e.kind == JobEvent::Kind::kDone) final_job = e.job;
  });
  if (!watched.ok()) {
    // The job is in fusiond's journal: a daemon restart runs it again exactly once.
    return Fail(absl::Status(watched.code(), absl::StrCat(watched.message(), " (while watching job ", job->job_id,
                                                          "; see it later with: fusionctl job ", job->job_id, ")")));
  }
  if (final_job.state != JobState::kSucceeded) {
    const absl::Status failed(static_cast<absl::StatusCode>(final_job.error_code),
                              absl::StrCat("job ", final_job.job_id, " ", ToString(final_job.state), ": ",
                                           final_job.error_message));
    if (!a.json) return Fail(failed);
    // The daemon's word for where it ended (a video's per-frame stages send no stage events);
    // the last stage seen from a daemon that predates error_stage.
    return FailJson(failed, final_job.error_message, final_job.job_id, ToString(final_job.state),
                    final_job.error_stage.empty() ? stage : final_job.error_stage, degradations);
  }
  return RunResult(client, job->job_id, a.output, a.json);
}

int RunResult(Client& client, const std::string& id, const std::string& output, bool json) {
  auto result = client.GetJobResult(id);
  if (!result.ok()) return Fail(result.status());
  std::ofstream out(output, std::ios::binary);
  out.write(result->image.data(), static_cast<std::streamsize>(result->image.size()));
  if (!out) {  // a local error: no gRPC status name
    std::fprintf(stderr, "fusionctl: cannot write '%s': %s; the result stays with fusiond: fusionctl result %s -o OTHER\n",
                 output.c_str(), std::strerror(errno), id.c_str());
    return 1;
  }
  if (json) {
    nlohmann::json j = JobResultToJson(*result);
    const TransferStats t = client.transfer_stats();  // this process's calls: submit and result
    j["transfer"] = {{"images_inline", t.images_inline},
                     {"bytes_inline", t.bytes_inline},
                     {"images_inline_fallback", t.images_inline_fallback},
                     {"images_by_memfd", t.images_by_memfd},
                     {"bytes_by_memfd", t.bytes_by_memfd},
                     {"memfd_us", t.memfd_us}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << output << "\n";
  }
  return 0;
}

int RunJobs(Client& client, bool json, bool all_uids) {
  auto jobs = all_uids ? client.ListAllJobs() : client.ListJobs();
  if (!jobs.ok()) return Fail(jobs.status());
  // The open live sessions after the jobs (a daemon without them answers UNIMPLEMENTED: none).
  auto sessions = all_uids ? client.ListAllLiveSessions() : client.ListLiveSessions();
  if (!sessions.ok() && !absl::IsUnimplemented(sessions.status())) return Fail(sessions.status());
  nlohmann::json arr = nlohmann::json::array();
  for (const JobInfo& j : *jobs) {
    if (json) arr.push_back(JobToJson(j));
    else std::cout << (all_uids ? absl::StrCat("uid ", j.owner_uid, "  ") : "") << JobToText(j) << "\n";
  }
  for (const LiveSessionStatus& l : sessions.ok() ? *sessions : std::vector<LiveSessionStatus>{}) {
    if (json) arr.push_back(LiveSessionToJson(l));
    else std::cout << (all_uids ? absl::StrCat("uid ", l.owner_uid, "  ") : "") << LiveSessionToText(l) << "\n";
  }
  if (json) std::cout << arr.dump(2) << "\n";
  return 0;
}

int RunJob(Client& client, const std::string& id, bool json) {
  auto job = client.GetJob(id);
  if (!job.ok()) return Fail(job.status());
  std::cout << (json ? JobToJson(*job).dump(2) : JobToText(*job)) << "\n";
  return 0;
}

int RunCancel(Client& client, const std::string& id, bool json) {
  auto job = client.CancelJob(id);
  if (!job.ok()) return Fail(job.status());
  // A running job ends at its next checkpoint (a face, tile or detection pass): wait briefly for
  // that, so the answer is usually the final state; past kCancelWait it says "cancel requested".
  constexpr auto kCancelWait = std::chrono::seconds(2);
  const auto until = std::chrono::steady_clock::now() + kCancelWait;
  while (job->state == JobState::kRunning && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto now = client.GetJob(id);
    if (!now.ok()) break;  // the cancel was accepted: report what it returned
    job = *std::move(now);
  }
  std::cout << (json ? JobToJson(*job).dump(2) : JobToText(*job)) << "\n";
  return 0;
}

}  // namespace fusion::ctl
