#include "rpc/fusion_service.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "fusion_status.h"
#include "rpc/memory_watch.h"
#include "rpc/peer.h"
#include "rpc/stream_util.h"
#include "spdlog/spdlog.h"

namespace fusion {
namespace {

// Drops the live sessions of `state` that are not `uid`'s.
void KeepSessionsOf(uint32_t uid, v1::MemoryState* state) {
  auto* sessions = state->mutable_live_sessions();
  sessions->erase(std::remove_if(sessions->begin(), sessions->end(),
                                 [uid](const v1::LiveSessionInfo& s) { return s.owner_uid() != uid; }),
                  sessions->end());
}

}  // namespace

absl::StatusOr<PeerCred> FusionService::Authorize(grpc::CallbackServerContext* ctx) const {
  auto cred = PeerCredFromGrpcPeer(ctx->peer());
  if (!cred.ok()) return absl::PermissionDeniedError(cred.status().message());
  absl::Status st = CheckUidAllowed(cred->uid, options_.allowed_uids);
  if (!st.ok()) {
    uint64_t held_back = 0;
    if (refusal_log_.Admit(cred->uid, absl::Now(), &held_back)) {
      spdlog::warn("refused call from uid {} pid {}: {}{}", cred->uid, cred->pid, std::string(st.message()),
                   LogThrottle::HeldBackNote(held_back));
    }
    return st;
  }
  return cred;
}

bool FusionService::IsAdmin(grpc::CallbackServerContext* ctx, const PeerCred& cred) const {
  const AdminPolicy& admins = options_.admins;
  if (admins.AdminByUid(cred.uid)) return true;
  if (!admins.has_group()) return false;
  auto groups = PeerGroupsFromGrpcPeer(ctx->peer(), cred.uid, cred.gid);
  return groups.ok() && admins.AdminByGroup(cred.gid, *groups);
}

absl::Status FusionService::AuthorizeAdmin(grpc::CallbackServerContext* ctx, const PeerCred& cred,
                                           const char* method) const {
  if (IsAdmin(ctx, cred)) return absl::OkStatus();
  const AdminPolicy& admins = options_.admins;
  absl::Status st = admins.Denied(method, cred.uid);
  uint64_t held_back = 0;
  if (admin_refusal_log_.Admit(cred.uid, absl::Now(), &held_back)) {
    spdlog::warn("refused {} from uid {} pid {}: not an admin{}", method, cred.uid, cred.pid,
                 LogThrottle::HeldBackNote(held_back));
  }
  return st;
}

grpc::ServerUnaryReactor* FusionService::GetMemoryState(grpc::CallbackServerContext* ctx,
                                                        const v1::GetMemoryStateRequest*,
                                                        v1::MemoryState* response) {
  auto* reactor = ctx->DefaultReactor();
  auto cred = Authorize(ctx);
  if (!cred.ok()) {
    reactor->Finish(ToGrpcStatus(cred.status()));
    return reactor;
  }
  auto state = memory_->Snapshot();
  if (state.ok()) {
    *response = *std::move(state);
    KeepVisibleSessions(ctx, *cred, response);
  }
  reactor->Finish(ToGrpcStatus(state.status()));
  return reactor;
}

void FusionService::KeepVisibleSessions(grpc::CallbackServerContext* ctx, const PeerCred& cred,
                                        v1::MemoryState* state) const {
  if (!state->live_sessions().empty() && !IsAdmin(ctx, cred)) KeepSessionsOf(cred.uid, state);
}

grpc::ServerUnaryReactor* FusionService::Unimplemented(grpc::CallbackServerContext* ctx,
                                                       const char* method) {
  auto* reactor = ctx->DefaultReactor();
  auto cred = Authorize(ctx);
  reactor->Finish(cred.ok() ? UnimplementedStatus(method) : ToGrpcStatus(cred.status()));
  return reactor;
}



grpc::ServerWriteReactor<v1::MemoryState>* FusionService::WatchMemory(
    grpc::CallbackServerContext* ctx, const v1::WatchMemoryRequest* request) {
  auto cred = Authorize(ctx);
  if (!cred.ok()) return new FinishedStream<v1::MemoryState>(ToGrpcStatus(cred.status()));
  auto slot = watch_slots_.Acquire(cred->uid, "WatchMemory");
  if (!slot.ok()) return new FinishedStream<v1::MemoryState>(ToGrpcStatus(slot.status()));
  // The caller's sessions only, unless an admin (decided once, at the stream's start).
  std::function<void(v1::MemoryState*)> visible;
  if (!IsAdmin(ctx, *cred)) {
    visible = [uid = cred->uid](v1::MemoryState* state) { KeepSessionsOf(uid, state); };
  }
  return MemoryWatchReactor::Start(memory_, MemoryWatchReactor::Interval(request->interval_ms()), &memory_watches_,
                                   &stopping_, *std::move(slot), std::move(visible));
}

}  // namespace fusion
