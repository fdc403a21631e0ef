// The one table of fusiond's configuration keys (config_table.h says what is made from it).
#include "config/config_table.h"

#include <algorithm>

namespace fusion::config_table {
namespace {

using C = DaemonConfig;

ConfigKey Make(absl::string_view key, KeyType type, Member member, absl::string_view doc) {
  ConfigKey k;
  k.key = key;
  k.type = type;
  k.member = member;
  k.doc = doc;
  return k;
}

ConfigKey String(absl::string_view key, std::string C::*m, absl::string_view doc) {
  return Make(key, KeyType::kString, m, doc);
}
ConfigKey Strings(absl::string_view key, std::vector<std::string> C::*m, absl::string_view doc) {
  return Make(key, KeyType::kStrings, m, doc);
}
ConfigKey Uids(absl::string_view key, std::vector<uid_t> C::*m, absl::string_view doc) {
  return Make(key, KeyType::kUids, m, doc);
}
ConfigKey Bytes(absl::string_view key, uint64_t C::*m, absl::string_view doc) {
  ConfigKey k = Make(key, KeyType::kBytes, m, doc);
  k.unit = Unit::kBytes;
  return k;
}
template <typename T>
ConfigKey Integer(absl::string_view key, T C::*m, double lo, double hi, Unit unit, absl::string_view doc) {
  ConfigKey k = Make(key, KeyType::kInteger, m, doc);
  k.range = Range{lo, hi};
  k.unit = unit;
  return k;
}
ConfigKey Number(absl::string_view key, double C::*m, Range range, Unit unit, absl::string_view doc) {
  ConfigKey k = Make(key, KeyType::kNumber, m, doc);
  k.range = range;
  k.unit = unit;
  return k;
}
ConfigKey Duration(absl::string_view key, int64_t C::*m, absl::string_view doc) {
  return Make(key, KeyType::kDuration, m, doc);
}

constexpr Unit kNoUnit = Unit::kNone;

}  // namespace

ConfigKey ConfigKey::Flag(absl::string_view name) const {
  ConfigKey k = *this;
  k.has_flag = true;
  k.flag_name = name;
  return k;
}
ConfigKey ConfigKey::Zero(absl::string_view means) const {
  ConfigKey k = *this;
  k.zero_means = means;
  return k;
}
ConfigKey ConfigKey::Values(absl::string_view words) const {
  ConfigKey k = *this;
  k.values = words;
  return k;
}
ConfigKey ConfigKey::Reloadable() const {
  ConfigKey k = *this;
  k.reloadable = true;
  return k;
}
ConfigKey ConfigKey::Forever() const {
  ConfigKey k = *this;
  k.forever = true;
  return k;
}

std::string ConfigKey::FlagSpelling() const {
  if (!has_flag) return "";
  std::string name(flag_name.empty() ? key : flag_name);
  std::replace(name.begin(), name.end(), '_', '-');
  return "--" + name;
}

const std::vector<ConfigKey>& Keys() {
  // clang-format off
  static const std::vector<ConfigKey>* kKeys = new std::vector<ConfigKey>{
    // Sockets and who may call.
    String("socket", &C::socket, "Unix socket path; the memfd socket is PATH.fd (env FUSIOND_SOCKET)").Flag(),
    String("socket_group", &C::socket_group, "group given to the socket files (mode 0660)").Zero("the process's group"),
    Uids("allowed_uids", &C::allowed_uids, "uids allowed to call, besides the daemon's own").Zero("anyone who can open the socket"),
    Uids("admin_uids", &C::admin_uids, "uids that may load, unload, pin models (besides root and the daemon's uid)"),
    String("admin_group", &C::admin_group, "members of this group may too"),
    Integer("max_connections_per_uid", &C::max_connections_per_uid, 1, 4096, kNoUnit, "gRPC connections open at once per uid"),
    Integer("max_connections", &C::max_connections, 1, 65536, kNoUnit, "gRPC connections open at once in all"),
    Integer("fd_max_connections_per_uid", &C::fd_max_connections_per_uid, 1, 1024, kNoUnit, "fd-socket connections served at once per uid"),
    Integer("fd_max_connections", &C::fd_max_connections, 1, 4096, kNoUnit, "fd-socket connections served at once in all"),
    Integer("max_queued_jobs_per_uid", &C::max_queued_jobs_per_uid, 1, 100000, kNoUnit, "jobs one uid may have queued"),
    Integer("max_watch_streams_per_uid", &C::max_watch_streams_per_uid, 1, 1024, kNoUnit, "open WatchJob + WatchMemory streams per uid"),
    Integer("max_live_sessions_per_uid", &C::max_live_sessions_per_uid, 1, 64, kNoUnit, "open Live sessions per uid (not jobs: max_concurrent_jobs does not count them)").Flag(),
    Bytes("grpc_memory_quota", &C::grpc_memory_quota, "gRPC's own memory, all connections together").Values("[2 x max_message_bytes, 1TiB]"),
    Bytes("max_message_bytes", &C::max_message_bytes, "largest gRPC message accepted or sent").Values("[4KiB, 2GiB)"),
    Integer("stalled_connection_timeout_ms", &C::stalled_connection_timeout_ms, 0, 600000, Unit::kMs,
            "close a connection leaving >= 32 KiB of replies unread this long").Zero("never"),
    // Device and memory.
    String("device", &C::device, "where models run").Values("cpu, cuda:N").Flag(),
    Bytes("device_memory_limit", &C::device_memory_limit, "device-tier cap").Zero("no cap beyond the device's free memory").Flag(),
    Bytes("device_memory_reserve", &C::device_memory_reserve, "kept free on the device for other programs").Flag(),
    Bytes("host_memory_limit", &C::host_memory_limit, "host-tier cap (weights in RAM, host working sets)").Zero("half of MemTotal").Flag(),
    Number("one_shot_pressure", &C::one_shot_pressure, Range{0, 1, true, false}, Unit::kFraction,
           "release detect/landmark models after use past this fraction of the budget").Flag(),
    Bytes("one_shot_min_free", &C::one_shot_min_free, "... or with less than this free (at most 1/8 of the budget)")
        .Zero("only the fraction counts").Flag(),
    Duration("keep_alive", &C::keep_alive_ms, "a model unused this long leaves the device for the host tier (pinned ones stay)")
        .Values("duration (\"30s\", \"5m\") or \"forever\"").Zero("as soon as no work needs it").Forever().Flag().Reloadable(),
    String("eviction_policy", &C::eviction_policy, "which unpinned models leave the device when it is full")
        .Values("default, lookahead, planner, lru, smallest, belady, belady-bytes").Flag(),
    // Models.
    String("models_dir", &C::models_dir, "directory of fetched model weights").Flag(),
    String("manifest", &C::manifest, "model catalogue (manifest.json)").Zero("the one installed next to the binary").Flag(),
    String("generator", &C::generator, "catalogue model of stage generate for every job").Flag(),
    Strings("pin_models", &C::pin_models, "catalogue models kept resident (hot)").Flag("pin-model"),
    // Jobs.
    Integer("max_concurrent_jobs", &C::max_concurrent_jobs, 1, 64, kNoUnit, "jobs running at once").Flag(),
    Integer("job_nice", &C::job_nice, 0, 19, kNoUnit, "nice value of the jobs' threads (a video's encode thread: 19; live sessions keep the daemon's)")
        .Zero("the daemon's").Flag(),
    Integer("job_threads", &C::job_threads, 0, 64, kNoUnit, "CPU threads one job splits detection passes and faces over")
        .Zero("the hardware threads").Flag(),
    Integer("max_pixels", &C::max_pixels, 1, 1 << 30, Unit::kPx, "largest image accepted (as its header declares)").Flag(),
    Integer("video_chunk_frames", &C::video_chunk_frames, 1, 100000, Unit::kFrames,
            "frames per committed chunk of a video job (the resume unit)").Flag(),
    Integer("min_face_px", &C::min_face_px, 8, 100000, Unit::kPx, "default smallest face width to find, target pixels").Flag(),
    Number("min_face_score", &C::min_face_score, Range{0, 1, false, true}, kNoUnit, "default detector score threshold")
        .Zero("the detector's own, 0.5").Flag(),
    Duration("result_retention", &C::result_retention_ms, "finished jobs' results are kept this long"),
    Bytes("result_retention_bytes", &C::result_retention_bytes, "... and within this many bytes of result images"),
    Bytes("face_cache_bytes", &C::face_cache_bytes, "source-face analysis cache across jobs").Zero("no cache"),
    String("state_dir", &C::state_dir, "directory of the job journal and results").Flag(),
    // Logging, shutdown, health, metrics.
    String("log_level", &C::log_level, "spdlog level").Values("trace, debug, info, warn, error, critical, off").Flag().Reloadable(),
    Integer("drain_ms", &C::drain_ms, 0, 600000, Unit::kMs, "time in-flight calls get at SIGTERM"),
    Integer("watchdog_stall_ms", &C::watchdog_stall_ms, 1000, 86400000, Unit::kMs, "watchdog fails when a running job is silent this long"),
    String("metrics_listen", &C::metrics_listen, "Prometheus endpoint http://HOST:PORT/metrics")
        .Values("HOST:PORT, [V6]:PORT").Zero("off").Flag(),
  };
  // clang-format on
  return *kKeys;
}

}  // namespace fusion::config_table
