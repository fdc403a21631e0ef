// FusionService::Live and ListLiveSessions (fusion_service.h; the stream itself: rpc/live_reactor.h).
#include "absl/strings/str_cat.h"
#include "fusion_status.h"
#include "rpc/fusion_service.h"
#include "rpc/live_reactor.h"
#include "rpc/stream_util.h"
#include "spdlog/spdlog.h"

namespace fusion {

grpc::ServerBidiReactor<v1::LiveRequest, v1::LiveResponse>* FusionService::Live(grpc::CallbackServerContext* ctx) {
  using Finished = FinishedBidi<v1::LiveRequest, v1::LiveResponse>;
  auto cred = Authorize(ctx);
  if (!cred.ok()) return new Finished(ToGrpcStatus(cred.status()));
  if (live_ == nullptr) return new Finished(UnimplementedStatus("Live", " (no pipeline is built into this daemon)"));
  if (stopping_.load()) return new Finished(grpc::Status(grpc::StatusCode::UNAVAILABLE, "fusiond is stopping"));
  auto slot = live_slots_.Acquire(cred->uid, "Live");
  if (!slot.ok()) return new Finished(ToGrpcStatus(slot.status()));
  const Owner owner{absl::StrCat("live-", ++live_sessions_), cred->uid};
  return LiveReactor::Start(live_, jobs_, memfds_, live_sessions_list_, owner, *std::move(slot), &stopping_,
                            options_.max_message_bytes);
}

grpc::ServerUnaryReactor* FusionService::ListLiveSessions(grpc::CallbackServerContext* ctx,
                                                          const v1::ListLiveSessionsRequest* request,
                                                          v1::ListLiveSessionsResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  auto cred = Authorize(ctx);
  if (!cred.ok()) {
    reactor->Finish(ToGrpcStatus(cred.status()));
    return reactor;
  }
  if (request->all_uids()) {
    if (absl::Status admin = AuthorizeAdmin(ctx, *cred, "ListLiveSessions(all_uids)"); !admin.ok()) {
      reactor->Finish(ToGrpcStatus(admin));
      return reactor;
    }
  }
  auto sessions = live_sessions_list_->List(request->all_uids() ? std::nullopt : std::optional<uint32_t>(cred->uid));
  if (request->all_uids()) {
    spdlog::info("uid {} pid {} (admin) listed every uid's live sessions: {}", cred->uid, cred->pid, sessions.size());
  }
  for (v1::LiveSessionInfo& s : sessions) *response->add_sessions() = std::move(s);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace fusion
