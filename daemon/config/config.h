// fusiond's configuration: defaults, then a TOML file (--config), then FUSIOND_SOCKET, then
// command-line flags (the later wins).
//
// Every key (its TOML name, flag, type, range, unit, default, whether SIGHUP applies it, one
// line of doc) is one entry of the table in config/config_table.cc; the TOML reader, the flags,
// --help, DaemonConfigKeys, ChangedKeys, LiveReloadKeys and docs/CONFIG.md are all made from it.
// A key's default is its DaemonConfig member's initializer. packaging/fusiond.toml (installed as
// /etc/fusiond/fusiond.toml) lists every key with its default; config_test checks it and
// docs/CONFIG.md against the table and DaemonConfig{}.
// Sizes are strings in ParseSize() syntax or integers (bytes). An unknown key, a wrong type or
// a bad value is INVALID_ARGUMENT naming the key (and the file).
// Thread-safety: DaemonConfig is a plain value type; the functions below are thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fusion {

inline constexpr char kDefaultSocketPath[] = "/run/fusiond/fusiond.sock";
inline constexpr char kSocketEnv[] = "FUSIOND_SOCKET";
// A duration key's value for "forever" (only keys whose table entry allows it: keep_alive).
inline constexpr int64_t kDurationForever = -1;

struct DaemonConfig {
  // Filesystem path of the Unix socket (without "unix://").
  std::string socket = kDefaultSocketPath;
  // "cpu" or "cuda:N".
  std::string device = "cpu";
  // Device-tier cap in bytes; 0 = no cap beyond what the device has free.
  uint64_t device_memory_limit = 0;
  // Host-tier cap in bytes (weights in RAM and host working sets: CPU-fallback stages, image
  // buffers); 0 = half of MemTotal (DefaultHostMemoryLimit), never unbounded.
  uint64_t host_memory_limit = 0;
  // Kept free for everyone else on the device: budget = min(limit, free + own - reserve).
  uint64_t device_memory_reserve = 512ull << 20;
  std::string models_dir = "/var/lib/fusiond/models";
  // The model catalogue; empty = <binary dir>/../share/fusiond/manifest.json when present (the
  // installed layout), else the source tree's models/manifest.json compiled in (a build tree).
  std::string manifest;
  // The catalogue model (stage "generate") that serves every job's generate stage: the builtin
  // "classical-fusion", or a TorchScript generator the manifest lists (format "torchscript",
  // models/generator/torchscript_generator.h). Checked against the catalogue at start-up.
  std::string generator = "classical-fusion";
  // Device pressure, under which one-shot models (detect, landmarks) are released right after
  // use: resident + reserved >= one_shot_pressure of the budget (a fraction in (0, 1]), or less
  // than one_shot_min_free bytes of the budget free, capped at an eighth of the budget
  // (0 = only the fraction counts).
  double one_shot_pressure = 0.85;
  uint64_t one_shot_min_free = 512ull << 20;
  // A model unused this long leaves the device for the host tier (docs/MEMORY.md#keep-alive),
  // milliseconds; TOML keep_alive = "5m", flag --keep-alive 5m or 500ms (absl duration syntax,
  // whole milliseconds, or "forever" = kDurationForever). 0 = as soon as no work needs it. The
  // catalogue's keep_alive overrides it per model; pinned models never leave.
  int64_t keep_alive_ms = 300 * 1000;
  // Which models leave the device when it is full (memory/eviction_policy.h, MakeEvictionPolicy
  // names): "default" (= kDefaultEvictionPolicy), "lookahead", "planner", "lru", "smallest",
  // "belady", "belady-bytes". TOML eviction_policy, flag --eviction-policy.
  std::string eviction_policy = "default";
  // Jobs running at once (the global concurrency limit); TOML max_concurrent_jobs.
  uint32_t max_concurrent_jobs = 2;
  // The nice value jobs' threads run at (JobManager::Options::worker_nice); live sessions'
  // threads keep the daemon's. TOML job_nice, flag --job-nice. 0 = the daemon's.
  uint32_t job_nice = 10;
  // CPU threads one job splits its independent work over (detection passes, faces of the
  // per-face stages; daemon/pipeline/parallel.h); TOML job_threads. 0 = the hardware threads.
  uint32_t job_threads = 0;
  // Finished jobs' results are kept this long, milliseconds (TOML result_retention = "24h", absl
  // duration syntax), and within this many bytes of result images (oldest removed first).
  int64_t result_retention_ms = 24 * 3600 * 1000;
  uint64_t result_retention_bytes = 1ull << 30;
  // The source-face cache (daemon/pipeline/face_cache.h): the analysis of source and reference
  // images kept across jobs, at most this many bytes (~1.2 KB per image), charged to the host
  // tier as it fills (host leases of 64 KiB: `fusionctl mem` counts them in the host tier's
  // reserved bytes and shows them as its cache_bytes); TOML face_cache_bytes. 0 = no cache.
  uint64_t face_cache_bytes = 1ull << 20;
  // Catalogue models pinned at start (hot models, e.g. the generator and the encoder), on top
  // of those the catalogue pins by default. A pin that does not fit is logged, not fatal.
  std::vector<std::string> pin_models;
  std::string state_dir = "/var/lib/fusiond";
  // Group given to the socket file (mode 0660); empty = leave the process's group.
  std::string socket_group;
  // uids allowed to call; empty = anyone who can open the socket. The daemon's own uid is
  // always allowed.
  std::vector<uid_t> allowed_uids;
  // Who may change model residency (LoadModel, UnloadModel, PinModel, UnpinModel): root, the
  // daemon's uid, these uids and the members (primary or supplementary) of this group. Both
  // unset = root and the daemon's uid only. Reading (ListModels, memory) is open to all allowed.
  std::vector<uid_t> admin_uids;
  std::string admin_group;
  // gRPC socket: connections open at once for one uid, and for all uids together; more are
  // closed at accept (logged at most once a minute per uid).
  uint32_t max_connections_per_uid = 64;
  uint32_t max_connections = 512;
  // fd socket (memfd exchange): connections served at once per uid and in all.
  uint32_t fd_max_connections_per_uid = 8;
  uint32_t fd_max_connections = 64;
  // Jobs one uid may have queued (not yet running); RESOURCE_EXHAUSTED beyond.
  uint32_t max_queued_jobs_per_uid = 64;
  // Open WatchJob + WatchMemory streams of one uid; RESOURCE_EXHAUSTED beyond. Each waiting
  // `fusionctl swap` holds one, so it stays above max_queued_jobs_per_uid + max_concurrent_jobs.
  uint32_t max_watch_streams_per_uid = 128;
  uint32_t max_live_sessions_per_uid = 2;
  // gRPC's own memory (transport buffers, call arenas) for all connections together, bytes:
  // past it gRPC stops reading from connections until memory is returned. At least twice
  // max_message_bytes (a largest request and its reply).
  uint64_t grpc_memory_quota = 256ull << 20;
  // A gRPC connection whose peer leaves >= 32 KiB of replies unread this long is closed
  // (a client that never reads, e.g. a PING flood), milliseconds; 0 = never.
  uint64_t stalled_connection_timeout_ms = 15000;
  // spdlog level: trace, debug, info, warn, error, critical, off.
  std::string log_level = "info";
  // Largest image accepted (source, target, reference), pixels as its header declares them;
  // checked at SubmitJob before anything is decoded. TOML max_pixels, flag --max-pixels.
  uint64_t max_pixels = 100'000'000;
  // Frames per chunk of a video job (the resume unit after a crash: a chunk's segment file is
  // committed when done). TOML video_chunk_frames, flag --video-chunk-frames.
  uint32_t video_chunk_frames = 30;
  // Largest gRPC message accepted or sent, bytes.
  uint64_t max_message_bytes = 32ull << 20;
  // Time given to in-flight calls at SIGTERM before they are cancelled, milliseconds.
  uint64_t drain_ms = 5000;
  // The health check behind systemd's watchdog (WatchdogSec=, rpc/service_notifier.h) fails
  // when a running job gives no sign of life (a stage event or a checkpoint: every face, tile
  // and detection pass) for this long, milliseconds (TOML only).
  uint64_t watchdog_stall_ms = 300000;
  // "HOST:PORT" for the Prometheus endpoint (GET /metrics, rpc/metrics_http.h); empty = off.
  // TOML metrics_listen, flag --metrics-listen. Loopback (127.0.0.1, [::1]) unless you mean
  // the network to read it.
  std::string metrics_listen;
  // Detection defaults for jobs that leave JobOptions.min_face_px / min_face_score at 0: the
  // smallest face width to find in pixels of the original target ([8, 100000]), and the
  // detector's score threshold ((0, 1); 0 = the detector's own, 0.5).
  uint32_t min_face_px = 40;
  double min_face_score = 0;

  bool operator==(const DaemonConfig&) const = default;
};

// Every TOML key ApplyToml accepts (any other is "unknown key"), in the example file's order.
const std::vector<std::string>& DaemonConfigKeys();

// The keys (DaemonConfigKeys() names, in that order) whose values differ between `a` and `b`.
std::vector<std::string> ChangedKeys(const DaemonConfig& a, const DaemonConfig& b);

// The keys a SIGHUP reload applies to the running daemon (main.cc): keep_alive, log_level. A
// change to any other key is logged as needing a restart and not applied.
const std::vector<std::string>& LiveReloadKeys();

// keep_alive_ms as the residency manager takes it: absl::InfiniteDuration() for "forever".
absl::Duration KeepAlive(const DaemonConfig& config);

// Applies a TOML document to `config`, then ValidateConfig. `origin` names the document in
// errors (a file path). Keys absent from the document keep their value in `config`.
absl::Status ApplyToml(const std::string& toml_text, const std::string& origin,
                       DaemonConfig& config);

// Parses fusiond's command line (argv[0] included). Returns the merged configuration, or
// INVALID_ARGUMENT with CLI11's or the config file's message. `--help` is reported as a
// status with code CANCELLED and the help text as message, so main can print it and exit 0;
// so is the hidden `--config-reference`, with ConfigReferenceMarkdown() as message.
absl::StatusOr<DaemonConfig> ParseDaemonCommandLine(int argc, const char* const* argv);

// docs/CONFIG.md: a Markdown table of every key (key / flag, type, range, unit, default,
// reloadable, description), made from the key table.
std::string ConfigReferenceMarkdown();

// HOST and PORT of metrics_listen's "HOST:PORT" / "[V6]:PORT" (PORT 0-65535); INVALID_ARGUMENT
// naming the key otherwise.
absl::StatusOr<std::pair<std::string, int>> ParseListenAddress(const std::string& listen);

// Checks what one key's reader cannot: the socket path's length, the device spec's and
// log_level's spelling, eviction_policy (a MakeEvictionPolicy name; the error lists the known
// ones), metrics_listen, max_message_bytes and the cross-field limits
// (per-uid <= total connections, grpc_memory_quota >= 2 x max_message_bytes).
// INVALID_ARGUMENT naming the key.
absl::Status ValidateConfig(const DaemonConfig& config);

}  // namespace fusion
