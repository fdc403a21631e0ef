#include "rpc/fusion_service.h"

#include "absl/strings/str_cat.h"
#include "fusion_status.h"
#include "rpc/peer.h"
#include "rpc/stream_util.h"
#include "spdlog/spdlog.h"

namespace fusion {
absl::StatusOr<PeerCred> FusionService::Authorize(grpc::CallbackServerContext* ctx) const {
  auto cred = PeerCredFromGrpcPeer(ctx->peer());
  if (!cred.ok()) return absl::PermissionDeniedError(cred.status().message());
  absl::Status st = CheckUidAllowed(cred->uid, options_.allowed_uids);
  if (!st.ok()) {
    spdlog::warn("refused call from uid {} pid {}: {}", cred->uid, cred->pid, std::string(st.message()));
    return st;
  }
  return cred;
}

grpc::ServerUnaryReactor* FusionService::GetMemoryState(grpc::CallbackServerContext* ctx,
                                                        const v1::GetMemoryStateRequest*,
                                                        v1::MemoryState* response) {
  auto* reactor = ctx->DefaultReactor();
  if (auto cred = Authorize(ctx); !cred.ok()) {
    reactor->Finish(ToGrpcStatus(cred.status()));
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
  auto cred = Authorize(ctx);
  reactor->Finish(cred.ok() ? UnimplementedStatus(method) : ToGrpcStatus(cred.status()));
  return reactor;
}

template <typename T>
grpc::ServerWriteReactor<T>* FusionService::UnimplementedStream(grpc::CallbackServerContext* ctx,
                                                                const char* method) {
  auto cred = Authorize(ctx);
  return new FinishedStream<T>(cred.ok() ? UnimplementedStatus(method) : ToGrpcStatus(cred.status()));
}


grpc::ServerWriteReactor<v1::MemoryState>* FusionService::WatchMemory(
    grpc::CallbackServerContext* ctx, const v1::WatchMemoryRequest*) {
  return UnimplementedStream<v1::MemoryState>(ctx, "WatchMemory");
}

}  // namespace fusion
