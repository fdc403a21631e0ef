// FusionService::Live (fusion_service.h; the stream itself: rpc/live_reactor.h).
#include "absl/strings/str_cat.h"
#include "fusion_status.h"
#include "rpc/fusion_service.h"
#include "rpc/live_reactor.h"
#include "rpc/stream_util.h"

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
  return LiveReactor::Start(live_, jobs_, memfds_, owner, *std::move(slot), &stopping_);
}

}  // namespace fusion
