#include "fusion/client.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <grpcpp/grpcpp.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "convert.h"
#include "memfd_transfer.h"
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
  // TransferStats, updated by concurrent calls.
  mutable std::atomic<uint64_t> images_inline{0}, bytes_inline{0}, images_inline_fallback{0},
      images_by_memfd{0}, bytes_by_memfd{0}, memfd_us{0};

  void CountInline(size_t bytes) const {
    images_inline += 1;
    bytes_inline += bytes;
  }
  void CountMemfd(size_t bytes, std::chrono::steady_clock::time_point start) const {
    images_by_memfd += 1;
    bytes_by_memfd += bytes;
    memfd_us += static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start).count());
  }

  void Prepare(grpc::ClientContext& ctx, int64_t factor = 1) const {
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::milliseconds(options.timeout_ms * factor));
  }
  std::string SocketPath() const { return target.substr(target.rfind("unix://", 0) == 0 ? 7 : 5); }
  std::string FdSocketPath() const { return SocketPath() + ".fd"; }
  void Debug(const std::string& note) const {
    if (options.debug_log) options.debug_log(note);
  }
  // "fd socket PATH: <reason>" for a failed companion-socket transfer.
  std::string FdSocketError(const absl::Status& st) const {
    absl::string_view reason = st.message();
    absl::ConsumePrefix(&reason, "fd socket: ");
    return absl::StrCat("fd socket ", FdSocketPath(), ": ", reason);
  }
  // Fills `image` inline or, past the threshold, with a memfd token. When the fd socket
  // refuses or fails (before any token exists), the image goes inline after all if `request`
  // (the message `image` belongs to) then still fits max_message_bytes.
  absl::Status SetImage(const std::string& bytes, v1::ImageData* image,
                        const google::protobuf::Message& request) const {
    if (bytes.size() <= options.memfd_threshold_bytes) {
      image->set_inline_bytes(bytes);
      CountInline(bytes.size());
      return absl::OkStatus();
    }
    const auto start = std::chrono::steady_clock::now();
    auto token = internal::PutMemfd(SocketPath(), bytes);
    if (token.ok()) {
      CountMemfd(bytes.size(), start);
      image->mutable_memfd()->set_token(*token);
      image->mutable_memfd()->set_size_bytes(bytes.size());
      return absl::OkStatus();
    }
    // A uid the daemon refuses would be refused inline too.
    if (token.status().code() == absl::StatusCode::kPermissionDenied) return token.status();
    const uint64_t needed = request.ByteSizeLong() + bytes.size() + 16;  // + tag and length
    if (needed > options.max_message_bytes) {
      return absl::UnavailableError(absl::StrCat(
          FdSocketError(token.status()), "; the image of ", bytes.size(),
          " bytes cannot go inline instead (the request would be ", needed,
          " bytes, over max_message_bytes ", options.max_message_bytes, ")"));
    }
    Debug(absl::StrCat(FdSocketError(token.status()), "; sending the image of ", bytes.size(),
                       " bytes inline instead"));
    image->set_inline_bytes(bytes);
    CountInline(bytes.size());
    images_inline_fallback += 1;
    return absl::OkStatus();
  }
  grpc::Status CallGetJobResult(const v1::GetJobResultRequest& request, v1::JobResult* response) const {
    grpc::ClientContext ctx;
    Prepare(ctx, 30);
    return fusion->GetJobResult(&ctx, request, response);
  }
  absl::Status TooLarge(const std::string& grpc_message) const;
  // UNAVAILABLE means nobody answered: say where we looked. gRPC's own "message larger than
  // max" (RESOURCE_EXHAUSTED, from the daemon's max_message_bytes or this channel's limit)
  // becomes a message naming the limit and the memfd path.
  // `factor`: the call's deadline in timeout_ms (Prepare's factor), for the message.
  absl::Status Error(const grpc::Status& status, int64_t factor = 1) const {
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED &&
        (absl::StartsWith(status.error_message(), "Received message larger than max") ||
         absl::StartsWith(status.error_message(), "Sent message larger than max"))) {
      return TooLarge(status.error_message());
    }
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      return absl::UnavailableError(
          absl::StrCat("cannot reach fusiond at ", target, ": ", status.error_message()));
    }
    // The call's own deadline (ClientOptions::timeout_ms) passed: gRPC says only "Deadline
    // Exceeded", on a connected channel too (fusionctl --timeout-ms 1 health gave that, exit 1,
    // where the README says 2). Nobody answered in time: UNAVAILABLE naming the wait. A
    // DEADLINE_EXCEEDED the daemon returns itself carries its own message and passes through.
    if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED &&
        (channel->GetState(false) != GRPC_CHANNEL_READY || status.error_message() == "Deadline Exceeded")) {
      return absl::UnavailableError(absl::StrCat("cannot reach fusiond at ", target,
                                                 ": no answer within ", options.timeout_ms * factor, " ms"));
    }
    return FromGrpcStatus(status);
  }
};

// gRPC says "Received message larger than max (N vs. M)"; the numbers are kept.
absl::Status Client::Impl::TooLarge(const std::string& grpc_message) const {
  std::string sizes;
  const size_t open = grpc_message.find('(');
  const size_t close = grpc_message.rfind(')');
  if (open != std::string::npos && close != std::string::npos && close > open) {
    std::string inner = grpc_message.substr(open + 1, close - open - 1);  // "N vs. M"
    const size_t vs = inner.find(" vs. ");
    if (vs != std::string::npos) {
      sizes = absl::StrCat(" (", inner.substr(0, vs), " bytes; the limit is ", inner.substr(vs + 5), " bytes)");
    }
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "the request is larger than fusiond's max_message_bytes", sizes,
      "; send large images as memfds through ", FdSocketPath(),
      " instead (the SDK does so for images over ClientOptions::memfd_threshold_bytes, now ",
      options.memfd_threshold_bytes, " bytes; fusionctl --memfd-threshold), or raise max_message_bytes in "
      "fusiond's configuration"));
}

std::string ErrorStage(const absl::Status& status) { return StageOf(status); }

std::string ResolveSocketTarget(const std::string& socket) {
  std::string path = socket;
  if (path.empty()) {
    const char* env = std::getenv("FUSIOND_SOCKET");
    path = (env != nullptr && *env != '\0') ? env : "/run/fusiond/fusiond.sock";
  }
  if (absl::StartsWith(path, "unix:")) return path;
  // "unix://" takes an absolute path (a relative one would read as an authority).
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  return absl::StrCat("unix://", ec ? path : absolute.lexically_normal().string());
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->target = ResolveSocketTarget(options.socket);
  if (impl->target == "unix://" || impl->target == "unix:") {
    return absl::InvalidArgumentError("empty socket path");
  }
  if (const std::string path = impl->SocketPath(); path.size() > 107) {  // sockaddr_un.sun_path
    return absl::InvalidArgumentError(absl::StrCat("socket path '", path, "' is ", path.size(),
                                                   " bytes; a Unix socket path holds at most 107"));
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

TransferStats Client::transfer_stats() const {
  return {.images_inline = impl_->images_inline.load(), .bytes_inline = impl_->bytes_inline.load(),
          .images_inline_fallback = impl_->images_inline_fallback.load(),
          .images_by_memfd = impl_->images_by_memfd.load(), .bytes_by_memfd = impl_->bytes_by_memfd.load(),
          .memfd_us = impl_->memfd_us.load()};
}

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

absl::Status Client::WatchMemory(uint32_t interval_ms,
                                 const std::function<bool(const MemoryState&)>& on_state) {
  grpc::ClientContext ctx;
  v1::WatchMemoryRequest request;
  request.set_interval_ms(interval_ms);
  auto reader = impl_->fusion->WatchMemory(&ctx, request);
  v1::MemoryState state;
  bool stopped = false;
  while (reader->Read(&state)) {
    if (!on_state(internal::FromProto(state))) {
      stopped = true;
      ctx.TryCancel();
      break;
    }
  }
  grpc::Status st = reader->Finish();
  if (stopped) return absl::OkStatus();
  if (!st.ok()) return impl_->Error(st);
  return absl::OkStatus();
}

absl::StatusOr<JobInfo> Client::SubmitJob(const std::string& source_image,
                                          const std::string& target_image,
                                          const SwapOptions& options) {
  v1::SubmitJobRequest request;
  *request.mutable_options() = internal::ToProto(options);
  if (options.faces == FaceSelection::kReference && !options.reference_image.empty()) {
    request.mutable_options()->clear_reference();
    if (auto st = impl_->SetImage(options.reference_image, request.mutable_options()->mutable_reference(),
                                  request);
        !st.ok()) {
      return st;
    }
  }
  if (auto st = impl_->SetImage(source_image, request.mutable_source(), request); !st.ok()) return st;
  if (auto st = impl_->SetImage(target_image, request.mutable_target(), request); !st.ok()) return st;
  grpc::ClientContext ctx;
  impl_->Prepare(ctx, 30);
  v1::SubmitJobResponse response;
  grpc::Status st = impl_->fusion->SubmitJob(&ctx, request, &response);
  if (!st.ok()) return impl_->Error(st, 30);
  return internal::FromProto(response.job());
}

absl::Status Client::WatchJob(const std::string& job_id,
                              const std::function<void(const JobEvent&)>& on_event) {
  grpc::ClientContext ctx;  // no deadline: a job may wait in the queue for long
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  auto reader = impl_->fusion->WatchJob(&ctx, request);
  v1::JobEvent event;
  while (reader->Read(&event)) on_event(internal::FromProto(event));
  grpc::Status st = reader->Finish();
  return st.ok() ? absl::OkStatus() : impl_->Error(st);
}

absl::StatusOr<JobInfo> Client::GetJob(const std::string& job_id) {
  grpc::ClientContext ctx;
  impl_->Prepare(ctx);
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  v1::Job response;
  grpc::Status st = impl_->fusion->GetJob(&ctx, request, &response);
  if (!st.ok()) return impl_->Error(st);
  return internal::FromProto(response);
}

absl::StatusOr<std::vector<JobInfo>> Client::ListJobs(const std::vector<JobState>& states,
                                                      uint32_t limit) {
  return ListJobsOf(states, limit, /*all_uids=*/false);
}

absl::StatusOr<std::vector<JobInfo>> Client::ListAllJobs(const std::vector<JobState>& states, uint32_t limit) {
  return ListJobsOf(states, limit, /*all_uids=*/true);
}

absl::StatusOr<std::vector<JobInfo>> Client::ListJobsOf(const std::vector<JobState>& states, uint32_t limit,
                                                        bool all_uids) {
  grpc::ClientContext ctx;
  impl_->Prepare(ctx);
  v1::ListJobsRequest request;
  for (JobState s : states) request.add_states(static_cast<v1::JobState>(s));
  request.set_limit(limit);
  request.set_all_uids(all_uids);
  v1::ListJobsResponse response;
  grpc::Status st = impl_->fusion->ListJobs(&ctx, request, &response);
  if (!st.ok()) return impl_->Error(st);
  std::vector<JobInfo> jobs;
  for (const auto& j : response.jobs()) jobs.push_back(internal::FromProto(j));
  return jobs;
}

absl::StatusOr<std::vector<LiveSessionStatus>> Client::ListLiveSessions() {
  return ListLiveSessionsOf(/*all_uids=*/false);
}

absl::StatusOr<std::vector<LiveSessionStatus>> Client::ListAllLiveSessions() {
  return ListLiveSessionsOf(/*all_uids=*/true);
}

absl::StatusOr<std::vector<LiveSessionStatus>> Client::ListLiveSessionsOf(bool all_uids) {
  grpc::ClientContext ctx;
  impl_->Prepare(ctx);
  v1::ListLiveSessionsRequest request;
  request.set_all_uids(all_uids);
  v1::ListLiveSessionsResponse response;
  grpc::Status st = impl_->fusion->ListLiveSessions(&ctx, request, &response);
  if (!st.ok()) return impl_->Error(st);
  std::vector<LiveSessionStatus> sessions;
  for (const auto& s : response.sessions()) sessions.push_back(internal::FromProto(s));
  return sessions;
}

absl::StatusOr<JobInfo> Client::CancelJob(const std::string& job_id) {
  grpc::ClientContext ctx;
  impl_->Prepare(ctx);
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  v1::Job response;
  grpc::Status st = impl_->fusion->CancelJob(&ctx, request, &response);
  if (!st.ok()) return impl_->Error(st);
  return internal::FromProto(response);
}

absl::StatusOr<JobResult> Client::GetJobResult(const std::string& job_id, bool prefer_memfd) {
  v1::GetJobResultRequest request;
  request.set_job_id(job_id);
  request.set_prefer_memfd(prefer_memfd);
  v1::JobResult response;
  if (grpc::Status st = impl_->CallGetJobResult(request, &response); !st.ok()) return impl_->Error(st, 30);
  JobResult result = internal::FromProto(response);
  if (response.image().has_memfd()) {
    const auto start = std::chrono::steady_clock::now();
    auto bytes = internal::GetMemfd(impl_->SocketPath(), response.image().memfd().token());
    if (bytes.ok()) {
      result.image = *std::move(bytes);
      result.image_by_memfd = true;
      impl_->CountMemfd(result.image.size(), start);
      return result;
    }
    // The fd socket refused or failed: ask again for the image inline if it fits.
    const uint64_t size = response.image().memfd().size_bytes();
    const uint64_t needed = size + response.ByteSizeLong();
    if (bytes.status().code() == absl::StatusCode::kPermissionDenied) return bytes.status();
    if (needed > impl_->options.max_message_bytes) {
      return absl::UnavailableError(absl::StrCat(
          impl_->FdSocketError(bytes.status()), "; the result of ", size,
          " bytes cannot come inline instead (over max_message_bytes ", impl_->options.max_message_bytes, ")"));
    }
    impl_->Debug(absl::StrCat(impl_->FdSocketError(bytes.status()), "; fetching the result of ", size,
                              " bytes inline instead"));
    request.set_require_inline(true);
    if (grpc::Status st = impl_->CallGetJobResult(request, &response); !st.ok()) return impl_->Error(st, 30);
    impl_->images_inline_fallback += 1;
  }
  result.image = std::move(*response.mutable_image()->mutable_inline_bytes());
  impl_->CountInline(result.image.size());
  return result;
}

std::future<absl::StatusOr<JobInfo>> Client::SubmitJobAsync(std::string source_image,
                                                            std::string target_image,
                                                            SwapOptions options) {
  return std::async(std::launch::async, [this, s = std::move(source_image),
                                         t = std::move(target_image), o = std::move(options)] {
    return SubmitJob(s, t, o);
  });
}
std::future<absl::Status> Client::WatchJobAsync(std::string job_id,
                                                std::function<void(const JobEvent&)> on_event) {
  return std::async(std::launch::async, [this, id = std::move(job_id), cb = std::move(on_event)] {
    return WatchJob(id, cb);
  });
}
std::future<absl::StatusOr<JobInfo>> Client::GetJobAsync(std::string job_id) {
  return std::async(std::launch::async, [this, id = std::move(job_id)] { return GetJob(id); });
}
std::future<absl::StatusOr<JobInfo>> Client::CancelJobAsync(std::string job_id) {
  return std::async(std::launch::async, [this, id = std::move(job_id)] { return CancelJob(id); });
}
std::future<absl::StatusOr<JobResult>> Client::GetJobResultAsync(std::string job_id) {
  return std::async(std::launch::async,
                    [this, id = std::move(job_id)] { return GetJobResult(id); });
}
absl::StatusOr<std::vector<ModelStatus>> Client::ListModels() {
  grpc::ClientContext ctx;
  impl_->Prepare(ctx);
  v1::ListModelsResponse response;
  grpc::Status st = impl_->fusion->ListModels(&ctx, v1::ListModelsRequest(), &response);
  if (!st.ok()) return impl_->Error(st);
  std::vector<ModelStatus> models;
  for (const v1::ModelInfo& m : response.models()) models.push_back(internal::FromProto(m));
  return models;
}

#define FUSION_MODEL_CALL(Method, scale)                                        \
  absl::StatusOr<ModelStatus> Client::Method(const std::string& name) {          \
    grpc::ClientContext ctx;                                                    \
    impl_->Prepare(ctx, scale);                                                 \
    v1::ModelRequest request;                                                   \
    request.set_name(name);                                                     \
    v1::ModelInfo response;                                                     \
    grpc::Status st = impl_->fusion->Method(&ctx, request, &response);          \
    if (!st.ok()) return impl_->Error(st, scale);                               \
    return internal::FromProto(response);                                      \
  }                                                                             \
  std::future<absl::StatusOr<ModelStatus>> Client::Method##Async(std::string name) { \
    return std::async(std::launch::async, [this, name] { return Method(name); }); \
  }
FUSION_MODEL_CALL(LoadModel, 30)
FUSION_MODEL_CALL(UnloadModel, 1)
FUSION_MODEL_CALL(PinModel, 30)
FUSION_MODEL_CALL(UnpinModel, 1)
#undef FUSION_MODEL_CALL

std::future<absl::StatusOr<std::vector<ModelStatus>>> Client::ListModelsAsync() {
  return std::async(std::launch::async, [this] { return ListModels(); });
}

std::future<absl::StatusOr<MemoryState>> Client::GetMemoryStateAsync() {
  return std::async(std::launch::async, [this] { return GetMemoryState(); });
}
std::future<absl::StatusOr<ServingStatus>> Client::HealthAsync(std::string service) {
  return std::async(std::launch::async, [this, s = std::move(service)] { return Health(s); });
}
std::future<absl::StatusOr<std::vector<JobInfo>>> Client::ListJobsAsync(
    std::vector<JobState> states, uint32_t limit) {
  return std::async(std::launch::async,
                    [this, st = std::move(states), limit] { return ListJobs(st, limit); });
}
std::future<absl::Status> Client::WatchMemoryAsync(
    uint32_t interval_ms, std::function<bool(const MemoryState&)> on_state) {
  return std::async(std::launch::async, [this, interval_ms, cb = std::move(on_state)] {
    return WatchMemory(interval_ms, cb);
  });
}

}  // namespace fusion

// ---- Live sessions ----

namespace fusion {

struct LiveSession::Impl {
  const Client::Impl* client = nullptr;
  grpc::ClientContext ctx;
  std::unique_ptr<grpc::ClientReaderWriter<v1::LiveRequest, v1::LiveResponse>> stream;
  LiveOpened opened;
  LiveSummary summary;
  bool writes_done = false, finished = false;

  absl::Status Send(const v1::LiveRequest& request) {
    if (writes_done || !stream->Write(request)) {
      return absl::FailedPreconditionError("the live stream has ended: Receive() gives its status");
    }
    return absl::OkStatus();
  }
  // The stream's final status (once).
  absl::Status End() {
    if (finished) return absl::FailedPreconditionError("the live stream has ended");
    finished = true;
    const grpc::Status st = stream->Finish();
    return st.ok() ? absl::OkStatus() : client->Error(st);
  }
  absl::Status SendFrame(uint64_t sequence, const std::string& bytes, const uint32_t* raw_size) {
    v1::LiveRequest request;
    v1::LiveFrame* f = request.mutable_frame();
    f->set_sequence(sequence);
    if (raw_size != nullptr) {
      f->mutable_raw()->set_width(raw_size[0]);
      f->mutable_raw()->set_height(raw_size[1]);
    }
    if (auto st = client->SetImage(bytes, f->mutable_image(), request); !st.ok()) return st;
    return Send(request);
  }
};

LiveSession::LiveSession(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LiveSession::~LiveSession() {
  if (!impl_->finished) {
    impl_->ctx.TryCancel();
    (void)impl_->stream->Finish();
  }
}
const LiveOpened& LiveSession::opened() const { return impl_->opened; }
const LiveSummary& LiveSession::summary() const { return impl_->summary; }
void LiveSession::Cancel() { impl_->ctx.TryCancel(); }

absl::Status LiveSession::SendRaw(uint64_t sequence, const std::string& bgr, uint32_t width, uint32_t height) {
  const uint32_t size[2] = {width, height};
  return impl_->SendFrame(sequence, bgr, size);
}
absl::Status LiveSession::SendEncoded(uint64_t sequence, const std::string& image) {
  return impl_->SendFrame(sequence, image, nullptr);
}
absl::Status LiveSession::CloseSend() {
  if (impl_->writes_done) return absl::OkStatus();
  impl_->writes_done = true;
  impl_->stream->WritesDone();
  return absl::OkStatus();
}

absl::StatusOr<std::optional<LiveFrameResult>> LiveSession::Receive() {
  v1::LiveResponse response;
  while (!impl_->finished && impl_->stream->Read(&response)) {
    if (response.has_summary()) {
      const v1::LiveSummary& s = response.summary();
      impl_->summary = {s.frames_received(), s.frames_returned(), s.frames_dropped()};
      continue;
    }
    if (!response.has_frame()) continue;
    v1::LiveFrameResult& f = *response.mutable_frame();
    const v1::LiveTimings& t = f.timings();
    return LiveFrameResult{.sequence = f.sequence(), .image = std::move(*f.mutable_image()), .width = f.width(),
                           .height = f.height(), .faces_swapped = f.faces_swapped(), .keyframe = f.keyframe(),
                           .frames_dropped = f.frames_dropped(),
                           .timings = {t.wait_ms(), t.decode_ms(), t.swap_ms(), t.encode_ms(), t.total_ms()}};
  }
  if (impl_->finished) return std::nullopt;
  if (auto st = impl_->End(); !st.ok()) return st;
  return std::nullopt;
}

absl::StatusOr<std::unique_ptr<LiveSession>> Client::OpenLive(const std::string& source_image,
                                                              const SwapOptions& options) {
  auto impl = std::make_unique<LiveSession::Impl>();
  impl->client = impl_.get();
  impl->stream = impl_->fusion->Live(&impl->ctx);
  v1::LiveRequest open;
  *open.mutable_open()->mutable_options() = internal::ToProto(options);
  if (auto st = impl_->SetImage(source_image, open.mutable_open()->mutable_source(), open); !st.ok()) {
    impl->ctx.TryCancel();
    (void)impl->stream->Finish();
    return st;
  }
  v1::LiveResponse response;
  if (!impl->stream->Write(open) || !impl->stream->Read(&response) || !response.has_opened()) {
    impl->writes_done = true;
    impl->stream->WritesDone();
    absl::Status st = impl->End();
    return st.ok() ? absl::InternalError("Live: the daemon ended the stream without opening the session") : st;
  }
  const v1::LiveOpened& o = response.opened();
  impl->opened = {o.device(), {o.models().begin(), o.models().end()}, o.model_bytes()};
  return std::make_unique<LiveSession>(std::move(impl));
}

}  // namespace fusion
