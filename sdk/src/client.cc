#include "fusion/client.h"

#include <cstdlib>
#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "convert.h"
#include "fusion/v1/fusion.grpc.pb.h"
#include "fusion_status.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace fusion {

struct Client::Impl {
  std::string target;
  ClientOptions options;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Fusion::Stub> fusion;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;

  void Prepare(grpc::ClientContext& ctx) const {
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(options.timeout_ms));
  }
  // UNAVAILABLE means nobody answered: say where we looked.
  absl::Status Error(const grpc::Status& status) const {
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      return absl::UnavailableError(
          absl::StrCat("cannot reach fusiond at ", target, ": ", status.error_message()));
    }
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
        channel->GetState(false) != GRPC_CHANNEL_READY) {
      return absl::UnavailableError(absl::StrCat("cannot reach fusiond at ", target,
                                                 ": no answer within ", options.timeout_ms, " ms"));
    }
    return FromGrpcStatus(status);
  }
};

std::string ResolveSocketTarget(const std::string& socket) {
  std::string path = socket;
  if (path.empty()) {
    const char* env = std::getenv("FUSIOND_SOCKET");
    path = (env != nullptr && *env != '\0') ? env : "/run/fusiond/fusiond.sock";
  }
  return absl::StartsWith(path, "unix:") ? path : absl::StrCat("unix://", path);
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->target = ResolveSocketTarget(options.socket);
  if (impl->target == "unix://" || impl->target == "unix:") {
    return absl::InvalidArgumentError("empty socket path");
  }
  if (options.timeout_ms <= 0) return absl::InvalidArgumentError("timeout_ms must be > 0");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  impl->channel = grpc::CreateCustomChannel(impl->target, grpc::InsecureChannelCredentials(), args);
  impl->fusion = v1::Fusion::NewStub(impl->channel);
  impl->health = grpc::health::v1::Health::NewStub(impl->channel);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

const std::string& Client::target() const { return impl_->target; }

absl::StatusOr<ServingStatus> Client::Health(const std::string& service) {
  grpc::ClientContext ctx;
  impl_->Prepare(ctx);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status st = impl_->health->Check(&ctx, request, &response);
  if (!st.ok()) return impl_->Error(st);
  switch (response.status()) {
    case grpc::health::v1::HealthCheckResponse::SERVING: return ServingStatus::kServing;
    case grpc::health::v1::HealthCheckResponse::NOT_SERVING: return ServingStatus::kNotServing;
    case grpc::health::v1::HealthCheckResponse::SERVICE_UNKNOWN: return ServingStatus::kServiceUnknown;
    default: return ServingStatus::kUnknown;
  }
}

absl::StatusOr<MemoryState> Client::GetMemoryState() {
  grpc::ClientContext ctx;
  impl_->Prepare(ctx);
  v1::MemoryState response;
  grpc::Status st = impl_->fusion->GetMemoryState(&ctx, v1::GetMemoryStateRequest(), &response);
  if (!st.ok()) return impl_->Error(st);
  return internal::FromProto(response);
}

}  // namespace fusion
