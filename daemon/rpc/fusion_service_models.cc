// FusionService: the model methods (ListModels, LoadModel, UnloadModel, PinModel, UnpinModel)
// over the residency manager. Names are catalogue names, never paths.
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "fusion_status.h"
#include "rpc/fusion_service.h"
#include "rpc/stream_util.h"

namespace fusion {
namespace {

constexpr char kNoModels[] = ": this fusiond has no model catalogue";
constexpr absl::Duration kUploadDeadline = absl::Seconds(60);

v1::ModelInfo ToInfo(const ModelSnapshot& m, const models::ModelCatalogue& catalogue) {
  v1::ModelInfo info;
  FillModelInfo(m, &info);
  if (auto spec = catalogue.Get(m.name); spec.ok()) {
    info.set_stage((*spec)->stage);
    info.set_tileable((*spec)->tileable);
  }
  return info;
}

}  // namespace

absl::StatusOr<v1::ModelInfo> FusionService::Describe(const std::string& name) const {
  for (const ModelSnapshot& m : residency_->Snapshot().models) {
    if (m.name == name) return ToInfo(m, *catalogue_);
  }
  return absl::NotFoundError(absl::StrCat("model '", name, "' is not in the catalogue"));
}

grpc::ServerUnaryReactor* FusionService::ListModels(grpc::CallbackServerContext* ctx,
                                                    const v1::ListModelsRequest*,
                                                    v1::ListModelsResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  auto cred = Authorize(ctx);
  if (!cred.ok() || residency_ == nullptr) {
    reactor->Finish(cred.ok() ? UnimplementedStatus("ListModels", kNoModels) : ToGrpcStatus(cred.status()));
    return reactor;
  }
  for (const ModelSnapshot& m : residency_->Snapshot().models) *response->add_models() = ToInfo(m, *catalogue_);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* FusionService::ModelOp(grpc::CallbackServerContext* ctx, const std::string& name,
                                                 v1::ModelInfo* response, const char* method,
                                                 std::function<absl::Status()> op, bool blocking) {
  auto* reactor = ctx->DefaultReactor();
  auto cred = Authorize(ctx);
  // Residency is everyone's: only admins change it, and a non-admin learns nothing about
  // which models exist (the check comes before NOT_FOUND).
  absl::Status allowed = cred.ok() ? AuthorizeAdmin(ctx, *cred, method) : cred.status();
  if (!allowed.ok() || residency_ == nullptr) {
    reactor->Finish(allowed.ok() ? UnimplementedStatus(method, kNoModels) : ToGrpcStatus(allowed));
    return reactor;
  }
  auto work = [this, reactor, name, response, op = std::move(op)] {
    absl::Status st = Describe(name).status();  // NOT_FOUND before anything moves
    if (st.ok()) st = op();
    if (st.ok()) {
      auto info = Describe(name);
      if (info.ok()) *response = *std::move(info);
      st = info.status();
    }
    reactor->Finish(ToGrpcStatus(st));
  };
  if (blocking) {
    std::thread(std::move(work)).detach();  // an upload must not hold a gRPC thread
  } else {
    work();
  }
  return reactor;
}

grpc::ServerUnaryReactor* FusionService::LoadModel(grpc::CallbackServerContext* ctx,
                                                   const v1::ModelRequest* request, v1::ModelInfo* response) {
  const std::string name = request->name();
  return ModelOp(ctx, name, response, "LoadModel",
                 [this, name] { return residency_->Load(name, absl::Now() + kUploadDeadline); }, true);
}

grpc::ServerUnaryReactor* FusionService::UnloadModel(grpc::CallbackServerContext* ctx,
                                                     const v1::ModelRequest* request, v1::ModelInfo* response) {
  const std::string name = request->name();
  return ModelOp(ctx, name, response, "UnloadModel", [this, name] { return residency_->Unload(name); }, false);
}

grpc::ServerUnaryReactor* FusionService::PinModel(grpc::CallbackServerContext* ctx,
                                                  const v1::ModelRequest* request, v1::ModelInfo* response) {
  const std::string name = request->name();
  return ModelOp(ctx, name, response, "PinModel",
                 [this, name] { return residency_->Pin(name, absl::Now() + kUploadDeadline); }, true);
}

grpc::ServerUnaryReactor* FusionService::UnpinModel(grpc::CallbackServerContext* ctx,
                                                    const v1::ModelRequest* request, v1::ModelInfo* response) {
  const std::string name = request->name();
  return ModelOp(ctx, name, response, "UnpinModel", [this, name] { return residency_->Unpin(name); }, false);
}

}  // namespace fusion
