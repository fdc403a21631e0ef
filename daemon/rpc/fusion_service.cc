#include "rpc/fusion_service.h"

#include "absl/strings/str_cat.h"
#include "fusion_status.h"
#include "rpc/peer.h"
#include "spdlog/spdlog.h"

namespace fusion {
namespace {

// A server stream that ends at once with `status`.
template <typename T>
class FinishedStream final : public grpc::ServerWriteReactor<T> {
 public:
  explicit FinishedStream(const grpc::Status& status) { this->Finish(status); }
  void OnDone() override { delete this; }
};

grpc::Status UnimplementedStatus(const char* method) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      absl::StrCat("fusion.v1.Fusion/", method,
                                   " is UNIMPLEMENTED in this version of fusiond"));
}

}  // namespace

absl::Status FusionService::Authorize(grpc::CallbackServerContext* ctx) const {
  auto cred = PeerCredFromGrpcPeer(ctx->peer());
  if (!cred.ok()) return absl::PermissionDeniedError(cred.status().message());
  absl::Status st = CheckUidAllowed(cred->uid, options_.allowed_uids);
  if (!st.ok()) spdlog::warn("refused call from uid {} pid {}: {}", cred->uid, cred->pid, std::string(st.message()));
  return st;
}

grpc::ServerUnaryReactor* FusionService::GetMemoryState(grpc::CallbackServerContext* ctx,
                                                        const v1::GetMemoryStateRequest*,
                                                        v1::MemoryState* response) {
  auto* reactor = ctx->DefaultReactor();
  if (absl::Status st = Authorize(ctx); !st.ok()) {
    reactor->Finish(ToGrpcStatus(st));
    return reactor;
  }
  auto state = memory_->Snapshot();
  if (state.ok()) *response = *std::move(state);
  reactor->Finish(ToGrpcStatus(state.status()));
  return reactor;
}

grpc::ServerUnaryReactor* FusionService::Unimplemented(grpc::CallbackServerContext* ctx,
                                                       const char* method) {
  auto* reactor = ctx->DefaultReactor();
  absl::Status st = Authorize(ctx);
  reactor->Finish(st.ok() ? UnimplementedStatus(method) : ToGrpcStatus(st));
  return reactor;
}

template <typename T>
grpc::ServerWriteReactor<T>* FusionService::UnimplementedStream(grpc::CallbackServerContext* ctx,
                                                                const char* method) {
  absl::Status st = Authorize(ctx);
  return new FinishedStream<T>(st.ok() ? UnimplementedStatus(method) : ToGrpcStatus(st));
}

grpc::ServerUnaryReactor* FusionService::SubmitJob(grpc::CallbackServerContext* ctx,
                                                   const v1::SubmitJobRequest*,
                                                   v1::SubmitJobResponse*) {
  return Unimplemented(ctx, "SubmitJob");
}
grpc::ServerWriteReactor<v1::JobEvent>* FusionService::WatchJob(grpc::CallbackServerContext* ctx,
                                                                const v1::WatchJobRequest*) {
  return UnimplementedStream<v1::JobEvent>(ctx, "WatchJob");
}
grpc::ServerUnaryReactor* FusionService::GetJob(grpc::CallbackServerContext* ctx,
                                                const v1::GetJobRequest*, v1::Job*) {
  return Unimplemented(ctx, "GetJob");
}
grpc::ServerUnaryReactor* FusionService::ListJobs(grpc::CallbackServerContext* ctx,
                                                  const v1::ListJobsRequest*, v1::ListJobsResponse*) {
  return Unimplemented(ctx, "ListJobs");
}
grpc::ServerUnaryReactor* FusionService::CancelJob(grpc::CallbackServerContext* ctx,
                                                   const v1::CancelJobRequest*, v1::Job*) {
  return Unimplemented(ctx, "CancelJob");
}
grpc::ServerUnaryReactor* FusionService::GetJobResult(grpc::CallbackServerContext* ctx,
                                                      const v1::GetJobResultRequest*, v1::JobResult*) {
  return Unimplemented(ctx, "GetJobResult");
}
grpc::ServerUnaryReactor* FusionService::ListModels(grpc::CallbackServerContext* ctx,
                                                    const v1::ListModelsRequest*,
                                                    v1::ListModelsResponse*) {
  return Unimplemented(ctx, "ListModels");
}
grpc::ServerUnaryReactor* FusionService::LoadModel(grpc::CallbackServerContext* ctx,
                                                   const v1::ModelRequest*, v1::ModelInfo*) {
  return Unimplemented(ctx, "LoadModel");
}
grpc::ServerUnaryReactor* FusionService::UnloadModel(grpc::CallbackServerContext* ctx,
                                                     const v1::ModelRequest*, v1::ModelInfo*) {
  return Unimplemented(ctx, "UnloadModel");
}
grpc::ServerUnaryReactor* FusionService::PinModel(grpc::CallbackServerContext* ctx,
                                                  const v1::ModelRequest*, v1::ModelInfo*) {
  return Unimplemented(ctx, "PinModel");
}
grpc::ServerUnaryReactor* FusionService::UnpinModel(grpc::CallbackServerContext* ctx,
                                                    const v1::ModelRequest*, v1::ModelInfo*) {
  return Unimplemented(ctx, "UnpinModel");
}
grpc::ServerWriteReactor<v1::MemoryState>* FusionService::WatchMemory(
    grpc::CallbackServerContext* ctx, const v1::WatchMemoryRequest*) {
  return UnimplementedStream<v1::MemoryState>(ctx, "WatchMemory");
}

}  // namespace fusion
