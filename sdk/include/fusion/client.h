// fusion::Client - the C++ SDK for fusiond (gRPC over its Unix socket, hidden behind pimpl:
// this header pulls in no gRPC or protobuf types).
//
//   auto client = fusion::Client::Connect({.socket = "/run/fusiond/fusiond.sock"});
//   auto mem = (*client)->GetMemoryState();   // absl::StatusOr<fusion::MemoryState>
//
// Errors are absl::Status with the daemon's code and message (see the status table in
// fusion.proto). When no daemon answers, calls return UNAVAILABLE with the message
// "cannot reach fusiond at unix:///...: <reason>" within the call timeout.
// Thread-safety: a Client may be used from many threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fusion/live.h"
#include "fusion/types.h"

namespace fusion {

struct ClientOptions {
  // Socket path or "unix://path". Empty: $FUSIOND_SOCKET, else /run/fusiond/fusiond.sock.
  std::string socket;
  // Deadline of each unary call, milliseconds (SubmitJob and GetJobResult get 30x this, as
  // they carry images).
  int64_t timeout_ms = 2000;
  // Images larger than this travel as sealed memfds over the companion socket (zero copy)
  // instead of inside the gRPC message, bytes.
  uint64_t memfd_threshold_bytes = 4ull << 20;
  // The largest gRPC message the daemon accepts (its max_message_bytes), bytes. When the fd
  // socket refuses or fails before an image is handed over (e.g. "ERR 8 too many fd-socket
  // connections from uid N ..."), the image goes inline instead if the request still fits
  // this; otherwise the call fails UNAVAILABLE naming the fd socket and the daemon's reason.
  uint64_t max_message_bytes = 32ull << 20;
  // Debug-level notes (e.g. such an inline fallback and its reason); empty: none. Called on
  // the calling thread.
  std::function<void(const std::string&)> debug_log;
};

// How this client's images travelled since Connect (every call together). Counts images sent
// (SubmitJob) and received (GetJobResult); memfd_us is the wall time of the companion-socket
// puts/gets, microseconds; images_inline_fallback counts the inline ones (included in
// images_inline) that went inline only because the fd socket refused or failed.
struct TransferStats {
  uint64_t images_inline = 0, bytes_inline = 0, images_inline_fallback = 0;
  uint64_t images_by_memfd = 0, bytes_by_memfd = 0;
  uint64_t memfd_us = 0;
};

class Client {
 public:
  // Creates a client for the socket; does not connect yet (the first call does).
  // INVALID_ARGUMENT for an empty or malformed target.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options = {});
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // "unix:///path/to.sock".
  const std::string& target() const;
  // Thread-safe; a snapshot of counters updated by concurrent calls.
  TransferStats transfer_stats() const;

  // grpc.health.v1 Check of `service` ("" = the whole server, "fusion.v1.Fusion").
  absl::StatusOr<ServingStatus> Health(const std::string& service = "");

  // Device and host tiers, models, clients and counters.
  absl::StatusOr<MemoryState> GetMemoryState();
  // WatchMemory: calls `on_state` with one MemoryState now and then one every `interval_ms`
  // (0 = 1000, at least 100) on the calling thread, until `on_state` returns false (OK) or the
  // stream fails (its status). Blocks; no deadline.
  absl::Status WatchMemory(uint32_t interval_ms, const std::function<bool(const MemoryState&)>& on_state);

  // ---- Jobs (errors: see the status table in fusion.proto) ----
  // Submits a swap of the face in `source_image` onto `target_image` (encoded PNG/JPEG/...
  // bytes). Images over memfd_threshold_bytes go by memfd. Returns the QUEUED job.
  absl::StatusOr<JobInfo> SubmitJob(const std::string& source_image,
                                    const std::string& target_image,
                                    const SwapOptions& options = {});
  // Calls `on_event` for every event of the job until its Done event (blocking); returns the
  // stream's status. `on_event` runs on the calling thread.
  absl::Status WatchJob(const std::string& job_id,
                        const std::function<void(const JobEvent&)>& on_event);
  absl::StatusOr<JobInfo> GetJob(const std::string& job_id);
  // The caller's jobs, newest first; `states` empty = all; `limit` 0 = all.
  absl::StatusOr<std::vector<JobInfo>> ListJobs(const std::vector<JobState>& states = {},
                                                uint32_t limit = 0);
  // Every uid's jobs (JobInfo::owner_uid says whose), newest first: admins only (root, the
  // daemon's uid, admin_uids, admin_group), PERMISSION_DENIED for others.
  absl::StatusOr<std::vector<JobInfo>> ListAllJobs(const std::vector<JobState>& states = {}, uint32_t limit = 0);
  // The caller's open live sessions, in the order they started.
  absl::StatusOr<std::vector<LiveSessionStatus>> ListLiveSessions();
  // Every uid's open live sessions: admins only, PERMISSION_DENIED for others (as ListAllJobs).
  absl::StatusOr<std::vector<LiveSessionStatus>> ListAllLiveSessions();
  // The caller's job; an admin cancels any uid's.
  absl::StatusOr<JobInfo> CancelJob(const std::string& job_id);
  // The result of a SUCCEEDED job, image included (fetched from a memfd when the daemon
  // sends one, or always when `prefer_memfd`).
  absl::StatusOr<JobResult> GetJobResult(const std::string& job_id, bool prefer_memfd = false);

  // ---- Live sessions (fusion/live.h) ----
  // Opens a session with `source_image` (encoded; memfd past the threshold) and `options` (of
  // them: ratio, enhance, faces ALL/LARGEST, detection, simple, video_detect,
  // keyframe_interval); returns once the daemon has leased its models and analysed the source
  // face. The session must not outlive the client.
  absl::StatusOr<std::unique_ptr<LiveSession>> OpenLive(const std::string& source_image,
                                                        const SwapOptions& options = {});

  // ---- Models (catalogue names, never paths; NOT_FOUND for an unknown name) ----
  // Every catalogue model with its residency.
  absl::StatusOr<std::vector<ModelStatus>> ListModels();
  // Brings the model to the device tier (evictable). RESOURCE_EXHAUSTED / DEADLINE_EXCEEDED
  // when it does not fit. Gets 30x the unary deadline (it may upload).
  absl::StatusOr<ModelStatus> LoadModel(const std::string& name);
  // Drops the device and host copies; FAILED_PRECONDITION when pinned or in use.
  absl::StatusOr<ModelStatus> UnloadModel(const std::string& name);
  // Loads and never evicts; FAILED_PRECONDITION when pins would exceed the device budget.
  absl::StatusOr<ModelStatus> PinModel(const std::string& name);
  absl::StatusOr<ModelStatus> UnpinModel(const std::string& name);

  // Asynchronous forms: the call runs on its own thread; the future holds its outcome.
  std::future<absl::StatusOr<JobInfo>> SubmitJobAsync(std::string source_image,
                                                      std::string target_image,
                                                      SwapOptions options = {});
  std::future<absl::Status> WatchJobAsync(std::string job_id,
                                          std::function<void(const JobEvent&)> on_event);
  std::future<absl::StatusOr<JobInfo>> GetJobAsync(std::string job_id);
  std::future<absl::StatusOr<JobInfo>> CancelJobAsync(std::string job_id);
  std::future<absl::StatusOr<JobResult>> GetJobResultAsync(std::string job_id);
  std::future<absl::StatusOr<MemoryState>> GetMemoryStateAsync();
  std::future<absl::StatusOr<ServingStatus>> HealthAsync(std::string service = "");
  std::future<absl::StatusOr<std::vector<JobInfo>>> ListJobsAsync(std::vector<JobState> states = {},
                                                                  uint32_t limit = 0);
  std::future<absl::Status> WatchMemoryAsync(uint32_t interval_ms,
                                             std::function<bool(const MemoryState&)> on_state);
  std::future<absl::StatusOr<std::vector<ModelStatus>>> ListModelsAsync();
  std::future<absl::StatusOr<ModelStatus>> LoadModelAsync(std::string name);
  std::future<absl::StatusOr<ModelStatus>> UnloadModelAsync(std::string name);
  std::future<absl::StatusOr<ModelStatus>> PinModelAsync(std::string name);
  std::future<absl::StatusOr<ModelStatus>> UnpinModelAsync(std::string name);

 private:
  friend class LiveSession;  // sends its frames as this client's images
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  absl::StatusOr<std::vector<JobInfo>> ListJobsOf(const std::vector<JobState>& states, uint32_t limit, bool all_uids);
  absl::StatusOr<std::vector<LiveSessionStatus>> ListLiveSessionsOf(bool all_uids);
  std::unique_ptr<Impl> impl_;
};

// The stage a failed call's status names beside its code (e.g. "decode": SubmitJob refused an
// image from its bytes, as a job fails in stage "decode"), or "" when it names none.
std::string ErrorStage(const absl::Status& status);

// The socket target a client with `socket` would use (applies $FUSIOND_SOCKET and the default;
// a relative path is made absolute against the current directory).
std::string ResolveSocketTarget(const std::string& socket);

}  // namespace fusion
