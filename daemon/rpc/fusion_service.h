// FusionService: the fusion.v1.Fusion gRPC service (callback API).
//
// Every handler first reads the caller's uid (SO_PEERCRED, see peer.h) and refuses uids that
// are not allowed (PERMISSION_DENIED). The residency-changing methods (LoadModel, UnloadModel,
// PinModel, UnpinModel) then refuse callers who are not admins (Options::admins; PERMISSION_DENIED
// naming the method, before any NOT_FOUND). One uid may hold at most max_watch_streams_per_uid
// WatchJob + WatchMemory streams and max_live_sessions_per_uid Live sessions (RESOURCE_EXHAUSTED
// beyond). Open live sessions are seen as jobs are: a uid sees its own (ListLiveSessions,
// GetMemoryState, WatchMemory); ListLiveSessions(all_uids) is for admins, and an admin's memory
// state lists every uid's sessions. Handlers validate and answer or enqueue; they never
// block and never touch the device. Methods whose component is not built yet answer
// UNIMPLEMENTED naming the method.
// A refused uid is logged at most once a minute (with the count held back since).
// Thread-safety: handlers run concurrently on gRPC's threads; the service's only mutable state
// is atomics and the refusal log's throttle (its own mutex).
#pragma once

#include <atomic>

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "fusion/v1/fusion.grpc.pb.h"
#include "common/log_throttle.h"
#include "jobs/job_manager.h"
#include "jobs/live_runner.h"
#include "rpc/live_sessions.h"
#include "rpc/memfd_registry.h"
#include "rpc/memory_state.h"
#include "rpc/peer.h"
#include "rpc/uid_limits.h"
#include "common/serial_worker.h"
#include "memory/residency_manager.h"
#include "models/catalogue/catalogue.h"

namespace fusion {

class FusionService final : public v1::Fusion::CallbackService {
 public:
  struct Options {
    std::vector<uid_t> allowed_uids;  // empty = anyone who can open the socket
    AdminPolicy admins;               // default: root and the daemon's uid
    int max_watch_streams_per_uid = 128;
    int max_live_sessions_per_uid = 2;
    // Results up to this size come back inline; larger ones (or on request) as a memfd.
    uint64_t inline_result_max_bytes = 4ull << 20;
    // The largest message the server sends (max_message_bytes): a live frame's result, always
    // inline, is refused before it is swapped when it could not go out.
    uint64_t max_message_bytes = 32ull << 20;
  };
  // All pointers must outlive the service. `jobs` may be null: the job methods then answer
  // UNIMPLEMENTED (no pipeline is built into this daemon).
  // `residency` and `catalogue` may be null: the model methods then answer UNIMPLEMENTED.
  // LoadModel and PinModel upload a model: they run on a thread of their own, not gRPC's.
  // `live_sessions` is where open live sessions are registered (the one `memory` reads, for
  // MemoryState.live_sessions); null: a registry of the service's own.
  FusionService(Options options, const MemoryStateSource* memory, jobs::JobManager* jobs,
                MemfdRegistry* memfds, ResidencyManager* residency = nullptr,
                const models::ModelCatalogue* catalogue = nullptr, jobs::LiveRunner* live = nullptr,
                LiveSessionRegistry* live_sessions = nullptr)
      : options_(std::move(options)), memory_(memory), jobs_(jobs), memfds_(memfds),
        residency_(residency), catalogue_(catalogue), live_(live),
        live_sessions_list_(live_sessions != nullptr ? live_sessions : &own_live_sessions_),
        watch_slots_("watch streams", options_.max_watch_streams_per_uid),
        live_slots_("live sessions", options_.max_live_sessions_per_uid) {}
  // Before the server's drain: open WatchMemory streams end at their next interval, live
  // sessions within 100 ms (UNAVAILABLE).
  void BeginShutdown() { stopping_ = true; }

  grpc::ServerUnaryReactor* GetMemoryState(grpc::CallbackServerContext* ctx,
                                           const v1::GetMemoryStateRequest* request,
                                           v1::MemoryState* response) override;

  // Not built yet: UNIMPLEMENTED (after the permission check).
  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* ctx, const v1::SubmitJobRequest*,
                                      v1::SubmitJobResponse*) override;
  grpc::ServerWriteReactor<v1::JobEvent>* WatchJob(grpc::CallbackServerContext* ctx,
                                                   const v1::WatchJobRequest*) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* ctx, const v1::GetJobRequest*,
                                   v1::Job*) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* ctx, const v1::ListJobsRequest*,
                                     v1::ListJobsResponse*) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* ctx, const v1::CancelJobRequest*,
                                      v1::Job*) override;
  grpc::ServerUnaryReactor* GetJobResult(grpc::CallbackServerContext* ctx,
                                         const v1::GetJobResultRequest*, v1::JobResult*) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* ctx, const v1::ListModelsRequest*,
                                       v1::ListModelsResponse*) override;
  grpc::ServerUnaryReactor* LoadModel(grpc::CallbackServerContext* ctx, const v1::ModelRequest*,
                                      v1::ModelInfo*) override;
  grpc::ServerUnaryReactor* UnloadModel(grpc::CallbackServerContext* ctx, const v1::ModelRequest*,
                                        v1::ModelInfo*) override;
  grpc::ServerUnaryReactor* PinModel(grpc::CallbackServerContext* ctx, const v1::ModelRequest*,
                                     v1::ModelInfo*) override;
  grpc::ServerUnaryReactor* UnpinModel(grpc::CallbackServerContext* ctx, const v1::ModelRequest*,
                                       v1::ModelInfo*) override;
  grpc::ServerWriteReactor<v1::MemoryState>* WatchMemory(grpc::CallbackServerContext* ctx,
                                                         const v1::WatchMemoryRequest*) override;
  // A live session (rpc/live_reactor.h); UNIMPLEMENTED without a live runner.
  grpc::ServerBidiReactor<v1::LiveRequest, v1::LiveResponse>* Live(grpc::CallbackServerContext* ctx) override;
  grpc::ServerUnaryReactor* ListLiveSessions(grpc::CallbackServerContext* ctx, const v1::ListLiveSessionsRequest*,
                                             v1::ListLiveSessionsResponse*) override;

 private:
  // The caller's credentials when it is allowed, else the status to answer with.
  absl::StatusOr<PeerCred> Authorize(grpc::CallbackServerContext* ctx) const;
  // OK when `cred` may change residency (see AdminPolicy), else PERMISSION_DENIED for `method`.
  // Whether `cred` is an admin (options_.admins), without logging a refusal.
  bool IsAdmin(grpc::CallbackServerContext* ctx, const PeerCred& cred) const;
  absl::Status AuthorizeAdmin(grpc::CallbackServerContext* ctx, const PeerCred& cred,
                              const char* method) const;
  // A video result (a file in the state directory) as inline bytes or a sealed memfd, as for an
  // image: inline when asked or small enough, else a memfd copied from the file page by page.
  absl::Status FileResult(const jobs::StoredResult& result, const v1::GetJobResultRequest& request, uid_t uid,
                          v1::JobResult* response) const;
  // Bytes of an ImageData (inline or a memfd token of `uid`); `what` names it in errors.
  absl::StatusOr<std::string> ImageBytes(const v1::ImageData& image, uid_t uid,
                                         const char* what) const;
  grpc::ServerUnaryReactor* Unimplemented(grpc::CallbackServerContext* ctx, const char* method);
  // Trims `state`'s live sessions to those `cred` may see: its own; an admin's, all.
  void KeepVisibleSessions(grpc::CallbackServerContext* ctx, const PeerCred& cred, v1::MemoryState* state) const;

  // ModelInfo of `name` from the manager's snapshot and the catalogue; NOT_FOUND if unknown.
  absl::StatusOr<v1::ModelInfo> Describe(const std::string& name) const;
  // Runs `op` on a thread of its own (it may upload), then answers with the model's info.
  grpc::ServerUnaryReactor* ModelOp(grpc::CallbackServerContext* ctx, const std::string& name,
                                    v1::ModelInfo* response, const char* method,
                                    std::function<absl::Status()> op, bool blocking);

  const Options options_;
  const MemoryStateSource* memory_;
  std::atomic<int> memory_watches_{0};  // open WatchMemory streams
  std::atomic<bool> stopping_{false};   // BeginShutdown() called
  jobs::JobManager* jobs_;
  MemfdRegistry* memfds_;
  ResidencyManager* residency_;
  const models::ModelCatalogue* catalogue_;
  jobs::LiveRunner* live_;
  LiveSessionRegistry own_live_sessions_;   // used when none is given
  LiveSessionRegistry* const live_sessions_list_;
  std::atomic<uint64_t> live_sessions_{0};  // sessions opened so far (their names)
  mutable LogThrottle refusal_log_{absl::Minutes(1)};  // per uid
  mutable LogThrottle admin_refusal_log_{absl::Minutes(1)};  // per uid
  UidSlots watch_slots_;  // WatchJob + WatchMemory streams per uid
  UidSlots live_slots_;   // Live sessions per uid
  // SubmitJob's plans and journal writes, off gRPC's threads (last: its destructor runs what
  // was posted, with the members above still alive).
  SerialWorker submits_{64};
};

}  // namespace fusion
