#include "config/config.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <toml++/toml.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "base/size.h"

namespace fusion {
namespace {

absl::Status KeyError(const std::string& origin, const std::string& key, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(origin, ": key '", key, "': ", why));
}

absl::Status ReadString(const toml::node& node, const std::string& origin, const std::string& key,
                        std::string& out) {
  auto v = node.value<std::string>();
  if (!v) return KeyError(origin, key, "must be a string");
  out = *v;
  return absl::OkStatus();
}

absl::Status ReadSize(const toml::node& node, const std::string& origin, const std::string& key,
                      uint64_t& out) {
  if (node.is_boolean()) return KeyError(origin, key, "must be a size string like \"512MiB\" or an integer");
  if (auto i = node.value_exact<int64_t>()) {
    if (*i < 0) return KeyError(origin, key, "a size cannot be negative");
    out = static_cast<uint64_t>(*i);
    return absl::OkStatus();
  }
  auto s = node.value<std::string>();
  if (!s) return KeyError(origin, key, "must be a size string like \"512MiB\" or an integer");
  auto parsed = ParseSize(*s);
  if (!parsed.ok()) return KeyError(origin, key, std::string(parsed.status().message()));
  out = *parsed;
  return absl::OkStatus();
}

absl::Status ReadUids(const toml::node& node, const std::string& origin, const std::string& key,
                      std::vector<uid_t>& out) {
  const toml::array* arr = node.as_array();
  if (arr == nullptr) return KeyError(origin, key, "must be an array of uids");
  out.clear();
  for (const toml::node& e : *arr) {
    auto i = e.value_exact<int64_t>();
    if (!i || *i < 0 || *i >= 4294967295) {
      return KeyError(origin, key, "every uid must be an integer in [0, 4294967294]");
    }
    out.push_back(static_cast<uid_t>(*i));
  }
  return absl::OkStatus();
}

absl::Status ReadCount(const toml::node& node, const std::string& origin, const std::string& key,
                       int64_t lo, int64_t hi, uint32_t& out) {
  auto i = node.value_exact<int64_t>();
  if (!i || *i < lo || *i > hi) {
    return KeyError(origin, key, absl::StrCat("must be an integer in [", lo, ", ", hi, "]"));
  }
  out = static_cast<uint32_t>(*i);
  return absl::OkStatus();
}

absl::Status ReadStrings(const toml::node& node, const std::string& origin, const std::string& key,
                         std::vector<std::string>& out) {
  const toml::array* arr = node.as_array();
  if (arr == nullptr) return KeyError(origin, key, "must be an array of strings");
  out.clear();
  for (const toml::node& e : *arr) {
    auto v = e.value<std::string>();
    if (!v) return KeyError(origin, key, "every entry must be a string");
    out.push_back(*v);
  }
  return absl::OkStatus();
}

absl::Status SizeFlag(const std::string& flag, const std::string& text, uint64_t& out) {
  auto parsed = ParseSize(text);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", parsed.status().message()));
  }
  out = *parsed;
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string>& DaemonConfigKeys() {
  static const std::vector<std::string> kKeys = {
      "socket", "socket_group", "allowed_uids", "admin_uids", "admin_group",
      "max_connections_per_uid", "max_connections", "fd_max_connections_per_uid",
      "fd_max_connections", "max_queued_jobs_per_uid", "max_watch_streams_per_uid",
      "grpc_memory_quota", "max_message_bytes", "stalled_connection_timeout_ms",
      "device", "device_memory_limit", "device_memory_reserve", "host_memory_limit",
      "one_shot_pressure", "one_shot_min_free", "models_dir", "manifest", "generator", "pin_models",
      "max_concurrent_jobs", "job_threads", "max_pixels", "video_chunk_frames", "min_face_px", "min_face_score", "result_retention",
      "result_retention_bytes", "face_cache_bytes", "state_dir", "log_level", "drain_ms", "watchdog_stall_ms",
      "metrics_listen"};
  return kKeys;
}

namespace {

using FieldEqual = bool (*)(const DaemonConfig&, const DaemonConfig&);
#define FUSION_FIELD(key, field) \
  { key, [](const DaemonConfig& x, const DaemonConfig& y) { return x.field == y.field; } }

// One comparison per TOML key (config_test checks that every key has one).
const std::vector<std::pair<std::string, FieldEqual>>& FieldComparisons() {
  static const std::vector<std::pair<std::string, FieldEqual>> kFields = {
      FUSION_FIELD("socket", socket), FUSION_FIELD("socket_group", socket_group),
      FUSION_FIELD("allowed_uids", allowed_uids), FUSION_FIELD("admin_uids", admin_uids),
      FUSION_FIELD("admin_group", admin_group),
      FUSION_FIELD("max_connections_per_uid", max_connections_per_uid),
      FUSION_FIELD("max_connections", max_connections),
      FUSION_FIELD("fd_max_connections_per_uid", fd_max_connections_per_uid),
      FUSION_FIELD("fd_max_connections", fd_max_connections),
      FUSION_FIELD("max_queued_jobs_per_uid", max_queued_jobs_per_uid),
      FUSION_FIELD("max_watch_streams_per_uid", max_watch_streams_per_uid),
      FUSION_FIELD("grpc_memory_quota", grpc_memory_quota),
      FUSION_FIELD("max_message_bytes", max_message_bytes),
      FUSION_FIELD("stalled_connection_timeout_ms", stalled_connection_timeout_ms),
      FUSION_FIELD("device", device), FUSION_FIELD("device_memory_limit", device_memory_limit),
      FUSION_FIELD("device_memory_reserve", device_memory_reserve),
      FUSION_FIELD("host_memory_limit", host_memory_limit),
      FUSION_FIELD("one_shot_pressure", one_shot_pressure),
      FUSION_FIELD("one_shot_min_free", one_shot_min_free), FUSION_FIELD("models_dir", models_dir),
      FUSION_FIELD("manifest", manifest), FUSION_FIELD("generator", generator),
      FUSION_FIELD("pin_models", pin_models),
      FUSION_FIELD("max_concurrent_jobs", max_concurrent_jobs), FUSION_FIELD("job_threads", job_threads),
      FUSION_FIELD("max_pixels", max_pixels),
      FUSION_FIELD("video_chunk_frames", video_chunk_frames),
      FUSION_FIELD("min_face_px", min_face_px), FUSION_FIELD("min_face_score", min_face_score),
      FUSION_FIELD("result_retention", result_retention_s),
      FUSION_FIELD("result_retention_bytes", result_retention_bytes),
      FUSION_FIELD("face_cache_bytes", face_cache_bytes),
      FUSION_FIELD("state_dir", state_dir), FUSION_FIELD("log_level", log_level),
      FUSION_FIELD("drain_ms", drain_ms), FUSION_FIELD("watchdog_stall_ms", watchdog_stall_ms),
      FUSION_FIELD("metrics_listen", metrics_listen)};
  return kFields;
}
#undef FUSION_FIELD

}  // namespace

std::vector<std::string> ChangedKeys(const DaemonConfig& a, const DaemonConfig& b) {
  std::vector<std::string> changed;
  for (const std::string& key : DaemonConfigKeys()) {
    for (const auto& [name, equal] : FieldComparisons()) {
      if (name == key && !equal(a, b)) changed.push_back(key);
    }
  }
  return changed;
}

const std::vector<std::string>& LiveReloadKeys() {
  static const std::vector<std::string> kLive = {"log_level"};
  return kLive;
}

absl::Status ApplyToml(const std::string& toml_text, const std::string& origin,
                       DaemonConfig& config) {
  toml::table table;
  try {
    table = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << origin << ": " << e.description() << " (line " << e.source().begin.line << ")";
    return absl::InvalidArgumentError(msg.str());
  }
  for (const auto& [k, node] : table) {
    const std::string key(k.str());
    const auto& keys = DaemonConfigKeys();
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) return KeyError(origin, key, "unknown key");
    absl::Status st;
    if (key == "socket") st = ReadString(node, origin, key, config.socket);
    else if (key == "device") st = ReadString(node, origin, key, config.device);
    else if (key == "device_memory_limit") st = ReadSize(node, origin, key, config.device_memory_limit);
    else if (key == "host_memory_limit") st = ReadSize(node, origin, key, config.host_memory_limit);
    else if (key == "device_memory_reserve") st = ReadSize(node, origin, key, config.device_memory_reserve);
    else if (key == "max_message_bytes") st = ReadSize(node, origin, key, config.max_message_bytes);
    else if (key == "models_dir") st = ReadString(node, origin, key, config.models_dir);
    else if (key == "manifest") st = ReadString(node, origin, key, config.manifest);
    else if (key == "generator") st = ReadString(node, origin, key, config.generator);
    else if (key == "state_dir") st = ReadString(node, origin, key, config.state_dir);
    else if (key == "socket_group") st = ReadString(node, origin, key, config.socket_group);
    else if (key == "metrics_listen") st = ReadString(node, origin, key, config.metrics_listen);
    else if (key == "log_level") st = ReadString(node, origin, key, config.log_level);
    else if (key == "allowed_uids") st = ReadUids(node, origin, key, config.allowed_uids);
    else if (key == "admin_uids") st = ReadUids(node, origin, key, config.admin_uids);
    else if (key == "admin_group") st = ReadString(node, origin, key, config.admin_group);
    else if (key == "max_connections_per_uid") st = ReadCount(node, origin, key, 1, 4096, config.max_connections_per_uid);
    else if (key == "max_connections") st = ReadCount(node, origin, key, 1, 65536, config.max_connections);
    else if (key == "fd_max_connections_per_uid") st = ReadCount(node, origin, key, 1, 1024, config.fd_max_connections_per_uid);
    else if (key == "fd_max_connections") st = ReadCount(node, origin, key, 1, 4096, config.fd_max_connections);
    else if (key == "max_queued_jobs_per_uid") st = ReadCount(node, origin, key, 1, 100000, config.max_queued_jobs_per_uid);
    else if (key == "max_watch_streams_per_uid") st = ReadCount(node, origin, key, 1, 1024, config.max_watch_streams_per_uid);
    else if (key == "grpc_memory_quota") st = ReadSize(node, origin, key, config.grpc_memory_quota);
    else if (key == "pin_models") st = ReadStrings(node, origin, key, config.pin_models);
    else if (key == "one_shot_min_free") st = ReadSize(node, origin, key, config.one_shot_min_free);
    else if (key == "one_shot_pressure") {
      auto d = node.value<double>();
      if (!d || !(*d > 0 && *d <= 1)) st = KeyError(origin, key, "must be a number in (0, 1] (fraction of the budget)");
      else config.one_shot_pressure = *d;
    }
    else if (key == "result_retention_bytes") st = ReadSize(node, origin, key, config.result_retention_bytes);
    else if (key == "face_cache_bytes") st = ReadSize(node, origin, key, config.face_cache_bytes);
    else if (key == "result_retention") {
      absl::Duration d;
      auto text = node.value<std::string>();
      if (!text || !absl::ParseDuration(*text, &d) || d < absl::ZeroDuration()) {
        st = KeyError(origin, key, "must be a duration string like \"24h\" or \"90m\"");
      } else {
        config.result_retention_s = absl::ToInt64Seconds(d);
      }
    }
    else if (key == "max_pixels") {
      auto i = node.value_exact<int64_t>();
      if (!i || *i < 1 || *i > (int64_t{1} << 30)) st = KeyError(origin, key, "must be an integer in [1, 2^30] (pixels)");
      else config.max_pixels = static_cast<uint64_t>(*i);
    }
    else if (key == "video_chunk_frames") {
      auto i = node.value_exact<int64_t>();
      if (!i || *i < 1 || *i > 100000) st = KeyError(origin, key, "must be an integer in [1, 100000] (frames)");
      else config.video_chunk_frames = static_cast<uint32_t>(*i);
    }
    else if (key == "max_concurrent_jobs") {
      auto i = node.value_exact<int64_t>();
      if (!i || *i < 1 || *i > 64) st = KeyError(origin, key, "must be an integer in [1, 64]");
      else config.max_concurrent_jobs = static_cast<uint32_t>(*i);
    }
    else if (key == "job_threads") {
      auto i = node.value_exact<int64_t>();
      if (!i || *i < 0 || *i > 64) st = KeyError(origin, key, "must be an integer in [0, 64] (0 = the hardware threads)");
      else config.job_threads = static_cast<uint32_t>(*i);
    }
    else if (key == "stalled_connection_timeout_ms") {
      auto i = node.value_exact<int64_t>();
      if (!i || *i < 0 || *i > 600000) st = KeyError(origin, key, "must be an integer in [0, 600000] (ms; 0 = never)");
      else config.stalled_connection_timeout_ms = static_cast<uint64_t>(*i);
    }
    else if (key == "min_face_px") {
      auto i = node.value_exact<int64_t>();
      if (!i || *i < 8 || *i > 100000) st = KeyError(origin, key, "must be an integer in [8, 100000] (pixels)");
      else config.min_face_px = static_cast<uint32_t>(*i);
    }
    else if (key == "min_face_score") {
      auto d = node.value<double>();
      if (!d || !(*d >= 0 && *d < 1)) st = KeyError(origin, key, "must be a number in [0, 1) (0 = the detector's own)");
      else config.min_face_score = *d;
    }
    else if (key == "drain_ms") {
      auto i = node.value_exact<int64_t>();
      if (!i || *i < 0 || *i > 600000) st = KeyError(origin, key, "must be an integer in [0, 600000] (ms)");
      else config.drain_ms = static_cast<uint64_t>(*i);
    }
    else if (key == "watchdog_stall_ms") {
      auto i = node.value_exact<int64_t>();
      if (!i || *i < 1000 || *i > 86400000) st = KeyError(origin, key, "must be an integer in [1000, 86400000] (ms)");
      else config.watchdog_stall_ms = static_cast<uint64_t>(*i);
    } else {
      st = KeyError(origin, key, "unknown key");
    }
    if (!st.ok()) return st;
  }
  return ValidateConfig(config);
}

absl::StatusOr<std::pair<std::string, int>> ParseListenAddress(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat("metrics_listen '", listen,
                                                   "': expected HOST:PORT, e.g. 127.0.0.1:9464 or [::1]:9464"));
  };
  if (colon == std::string::npos || colon == 0) return bad();
  std::string host = listen.substr(0, colon);
  int port = -1;
  if (!absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) return bad();
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return bad();
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return bad();  // a bare IPv6 address needs brackets
  }
  return std::make_pair(host, port);
}

absl::Status ValidateConfig(const DaemonConfig& config) {
  if (config.socket.empty()) return absl::InvalidArgumentError("socket: must not be empty");
  if (!config.metrics_listen.empty()) {
    if (auto address = ParseListenAddress(config.metrics_listen); !address.ok()) return address.status();
  }
  // sun_path holds 107 bytes; the companion socket adds ".fd".
  if (config.socket.size() + 3 > 107) {
    return absl::InvalidArgumentError(absl::StrCat("socket: '", config.socket, "' is ",
                                                   config.socket.size(),
                                                   " bytes; at most 104 fit a Unix socket path (with the \".fd\" companion)"));
  }
  if (config.device != "cpu") {
    uint32_t index = 0;
    const std::string digits = absl::StartsWith(config.device, "cuda:") ? config.device.substr(5) : "";
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
        !absl::SimpleAtoi(digits, &index)) {
      return absl::InvalidArgumentError(
          absl::StrCat("device: '", config.device, "' is not 'cpu' or 'cuda:N'"));
    }
  }
  static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  bool level_ok = false;
  for (const char* l : kLevels) level_ok |= config.log_level == l;
  if (!level_ok) {
    return absl::InvalidArgumentError(absl::StrCat("log_level: '", config.log_level,
                                                   "' is not one of trace|debug|info|warn|error|critical|off"));
  }
  if (config.max_message_bytes < 4096 || config.max_message_bytes > (1ull << 31) - 1) {
    return absl::InvalidArgumentError("max_message_bytes: must be in [4 KiB, 2 GiB)");
  }
  if (config.max_connections_per_uid > config.max_connections) {
    return absl::InvalidArgumentError(absl::StrCat("max_connections_per_uid: ", config.max_connections_per_uid,
                                                   " exceeds max_connections (", config.max_connections, ")"));
  }
  if (config.fd_max_connections_per_uid > config.fd_max_connections) {
    return absl::InvalidArgumentError(absl::StrCat("fd_max_connections_per_uid: ", config.fd_max_connections_per_uid,
                                                   " exceeds fd_max_connections (", config.fd_max_connections, ")"));
  }
  // gRPC must hold a largest request and its reply within the quota.
  if (config.grpc_memory_quota < 2 * config.max_message_bytes || config.grpc_memory_quota > (1ull << 40)) {
    return absl::InvalidArgumentError(absl::StrCat("grpc_memory_quota: ", config.grpc_memory_quota,
                                                   " bytes; must be in [2 x max_message_bytes (",
                                                   2 * config.max_message_bytes, "), 1 TiB]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DaemonConfig> ParseDaemonCommandLine(int argc, const char* const* argv) {
  CLI::App app{"fusiond: owns a GPU and runs face-fusion jobs for local programs over gRPC."};
  std::string config_path, socket, device, device_limit, host_limit, reserve, models_dir, manifest,
      generator, state_dir, log_level;
  app.add_option("--config", config_path, "TOML configuration file (flags override it)");
  app.add_option("--socket", socket, "Unix socket path (env FUSIOND_SOCKET; default /run/fusiond/fusiond.sock)");
  app.add_option("--device", device, "cpu | cuda:N (default cpu)");
  app.add_option("--device-memory-limit", device_limit, "device-tier cap: 512MiB, 6GiB, 1.5GB, bytes");
  app.add_option("--host-memory-limit", host_limit, "host-tier cap (weights in RAM)");
  app.add_option("--device-memory-reserve", reserve, "kept free for other processes (default 512MiB)");
  app.add_option("--models-dir", models_dir, "directory of fetched model weights");
  app.add_option("--manifest", manifest, "model catalogue (manifest.json); default: installed next to the binary");
  app.add_option("--generator", generator,
                 "catalogue model of stage generate for every job (default classical-fusion)");
  std::vector<std::string> pin_models;
  app.add_option("--pin-model", pin_models, "keep this catalogue model resident (hot); repeatable");
  std::string one_shot_min_free;
  double one_shot_pressure = 0;
  app.add_option("--one-shot-min-free", one_shot_min_free,
                 "release detect/landmark models after use when less is free (default 512MiB)");
  app.add_option("--one-shot-pressure", one_shot_pressure,
                 "... or when this fraction of the budget is in use (default 0.85)");
  std::string metrics_listen;
  app.add_option("--metrics-listen", metrics_listen,
                 "serve Prometheus metrics at http://HOST:PORT/metrics, e.g. 127.0.0.1:9464 (default: off)");
  uint32_t max_jobs = 0;
  app.add_option("--max-concurrent-jobs", max_jobs, "jobs running at once (default 2)")
      ->check(CLI::Range(1u, 64u));
  uint32_t job_threads = 0;
  app.add_option("--job-threads", job_threads,
                 "CPU threads one job splits detection passes and faces over (default: the hardware threads)")
      ->check(CLI::Range(1u, 64u));
  uint32_t chunk_frames = 0;
  app.add_option("--video-chunk-frames", chunk_frames,
                 "frames per committed chunk of a video job, the resume unit after a crash (default 30)")
      ->check(CLI::Range(1u, 100000u));
  uint64_t max_pixels = 0;
  app.add_option("--max-pixels", max_pixels, "largest image accepted, pixels (default 100000000)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  uint32_t min_face_px = 0;
  double min_face_score = 0;
  app.add_option("--min-face-px", min_face_px, "default smallest face width to find, target pixels (default 40)")
      ->check(CLI::Range(8u, 100000u));
  app.add_option("--min-face-score", min_face_score, "default detector score threshold in (0,1) (default: the detector's)");
  app.add_option("--state-dir", state_dir, "directory for the job journal and results");
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error|critical|off");
  // Answered by main() before any parsing (it knows what the binary was built against).
  bool version = false;
  app.add_flag("--version", version, "print fusiond's version, its LibTorch and CUDA, and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return absl::CancelledError(app.help());
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }

  DaemonConfig config;
  if (app.count("--config") > 0 && config_path.empty()) {
    return absl::InvalidArgumentError("--config: empty path");
  }
  if (app.count("--socket") > 0 && socket.empty()) {
    return absl::InvalidArgumentError("--socket: empty path");
  }
  if (!config_path.empty()) {
    if (std::filesystem::is_directory(config_path)) {
      return absl::InvalidArgumentError(absl::StrCat("--config: '", config_path, "' is a directory"));
    }
    std::ifstream in(config_path);
    if (!in) {
      return absl::InvalidArgumentError(absl::StrCat("--config: cannot read '", config_path, "'"));
    }
    std::stringstream text;
    text << in.rdbuf();
    if (auto st = ApplyToml(text.str(), config_path, config); !st.ok()) return st;
  }
  if (const char* env = std::getenv(kSocketEnv); env != nullptr && *env != '\0') {
    config.socket = env;
  }
  if (!socket.empty()) config.socket = socket;
  if (absl::StartsWith(config.socket, "unix://")) config.socket = config.socket.substr(7);
  // Clients address the socket as unix://<absolute path>; log and serve that.
  if (std::error_code ec; !config.socket.empty()) {
    const std::filesystem::path absolute = std::filesystem::absolute(config.socket, ec);
    if (!ec) config.socket = absolute.lexically_normal().string();
  }
  if (!device.empty()) config.device = device;
  if (!models_dir.empty()) config.models_dir = models_dir;
  if (!manifest.empty()) config.manifest = manifest;
  if (!generator.empty()) config.generator = generator;
  if (!pin_models.empty()) config.pin_models = pin_models;
  if (!state_dir.empty()) config.state_dir = state_dir;
  if (!log_level.empty()) config.log_level = log_level;
  if (!metrics_listen.empty()) config.metrics_listen = metrics_listen;
  if (!device_limit.empty()) {
    if (auto st = SizeFlag("device-memory-limit", device_limit, config.device_memory_limit); !st.ok()) return st;
  }
  if (!host_limit.empty()) {
    if (auto st = SizeFlag("host-memory-limit", host_limit, config.host_memory_limit); !st.ok()) return st;
  }
  if (max_jobs != 0) config.max_concurrent_jobs = max_jobs;
  if (job_threads != 0) config.job_threads = job_threads;
  if (max_pixels != 0) config.max_pixels = max_pixels;
  if (chunk_frames != 0) config.video_chunk_frames = chunk_frames;
  if (min_face_px != 0) config.min_face_px = min_face_px;
  if (min_face_score != 0) {
    if (!(min_face_score > 0 && min_face_score < 1)) {
      return absl::InvalidArgumentError(absl::StrCat("--min-face-score: ", min_face_score, " is not in (0, 1)"));
    }
    config.min_face_score = min_face_score;
  }
  if (!one_shot_min_free.empty()) {
    if (auto st = SizeFlag("one-shot-min-free", one_shot_min_free, config.one_shot_min_free); !st.ok()) return st;
  }
  if (one_shot_pressure != 0) {
    if (!(one_shot_pressure > 0 && one_shot_pressure <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat("--one-shot-pressure: ", one_shot_pressure, " is not in (0, 1]"));
    }
    config.one_shot_pressure = one_shot_pressure;
  }
  if (!reserve.empty()) {
    if (auto st = SizeFlag("device-memory-reserve", reserve, config.device_memory_reserve); !st.ok()) return st;
  }
  if (auto st = ValidateConfig(config); !st.ok()) return st;
  return config;
}

}  // namespace fusion
