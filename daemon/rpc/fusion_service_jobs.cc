// fusion.v1 job methods: SubmitJob, WatchJob, GetJob, ListJobs, CancelJob, GetJobResult.
#include <deque>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/mutex.h"
#include "fusion_status.h"
#include "rpc/fusion_service.h"
#include "rpc/request_checks.h"
#include "rpc/stream_util.h"
#include "spdlog/spdlog.h"
#include "base/status_macros.h"

namespace fusion {
namespace {

constexpr char kNoPipeline[] = " (no pipeline is built into this daemon)";

jobs::Priority ToPriority(v1::Priority p) {
  switch (p) {
    case v1::LOW: return jobs::Priority::kLow;
    case v1::HIGH: return jobs::Priority::kHigh;
    default: return jobs::Priority::kNormal;
  }
}

// Streams a job's events until its Done event, then finishes OK.
class WatchReactor final : public grpc::ServerWriteReactor<v1::JobEvent> {
 public:
  WatchReactor(jobs::JobManager* jobs, const std::string& id, uid_t uid,
               std::unique_ptr<UidSlots::Slot> slot)
      : jobs_(jobs), shared_(std::make_shared<Shared>()), slot_(std::move(slot)) {
    shared_->reactor = this;
    auto handle = jobs->Watch(id, uid, [shared = shared_](const v1::JobEvent& e) {
      shared->Push(e);
    });
    if (!handle.ok()) {
      MutexLock lock(&shared_->mu);
      shared_->FinishLocked(ToGrpcStatus(handle.status()));
      return;
    }
    handle_ = *handle;
  }
  void OnWriteDone(bool ok) override { shared_->WriteDone(ok); }
  void OnCancel() override {
    MutexLock lock(&shared_->mu);
    shared_->FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "watch cancelled"));
  }
  void OnDone() override {
    {
      MutexLock lock(&shared_->mu);
      shared_->reactor = nullptr;
    }
    if (handle_ != 0) jobs_->Unwatch(handle_);
    delete this;
  }

 private:
  // Outlives the reactor: a JobManager callback may run after OnDone.
  struct Shared {
    Mutex mu;
    WatchReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
    std::deque<v1::JobEvent> pending ABSL_GUARDED_BY(mu);
    bool writing ABSL_GUARDED_BY(mu) = false;
    bool finished ABSL_GUARDED_BY(mu) = false;

    void Push(const v1::JobEvent& e) {
      MutexLock lock(&mu);
      if (reactor == nullptr || finished) return;
      pending.push_back(e);
      if (!writing) {
        writing = true;
        reactor->StartWrite(&pending.front());
      }
    }
    void WriteDone(bool ok) {
      MutexLock lock(&mu);
      const bool was_done = !pending.empty() && pending.front().has_done();
      if (!pending.empty()) pending.pop_front();
      writing = false;
      if (!ok) return FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      if (was_done) return FinishLocked(grpc::Status::OK);
      if (!pending.empty() && !finished) {
        writing = true;
        reactor->StartWrite(&pending.front());
      }
    }
    void FinishLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
      if (finished || reactor == nullptr) return;
      finished = true;
      reactor->Finish(status);
    }
  };

  jobs::JobManager* jobs_;
  std::shared_ptr<Shared> shared_;
  std::unique_ptr<UidSlots::Slot> slot_;  // the caller's watch-stream slot; freed with the reactor
  uint64_t handle_ = 0;
};

}  // namespace

absl::StatusOr<std::string> FusionService::ImageBytes(const v1::ImageData& image, uid_t uid,
                                                      const char* what) const {
  switch (image.source_case()) {
    case v1::ImageData::kInlineBytes:
      if (image.inline_bytes().empty()) break;
      return image.inline_bytes();
    case v1::ImageData::kMemfd: {
      auto memfd = memfds_->Get(image.memfd().token(), uid);
      if (!memfd.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(what, " image: ", memfd.status().message()));
      }
      return std::string((*memfd)->bytes());  // the token is dropped when the call ends
    }
    default:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat(what, " image: missing or empty"));
}

absl::Status FusionService::FileResult(const jobs::StoredResult& result, const v1::GetJobResultRequest& request,
                                       uid_t uid, v1::JobResult* response) const {
  if (request.require_inline() ||
      (!request.prefer_memfd() && result.file_bytes <= options_.inline_result_max_bytes)) {
    std::ifstream in(result.file, std::ios::binary);
    std::string bytes(result.file_bytes, '\0');
    if (!in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()))) {
      return absl::InternalError(absl::StrCat("job '", request.job_id(), "': result file ", result.file,
                                              " cannot be read"));
    }
    response->mutable_image()->set_inline_bytes(std::move(bytes));
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(auto token, memfds_->PublishFile(result.file, uid));
  response->mutable_image()->mutable_memfd()->set_token(token);
  response->mutable_image()->mutable_memfd()->set_size_bytes(result.file_bytes);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* FusionService::SubmitJob(grpc::CallbackServerContext* ctx,
                                                   const v1::SubmitJobRequest* request,
                                                   v1::SubmitJobResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  // Whatever happens, memfd tokens named by this request are used up: a refused submit must
  // not leave the client's images registered (they count against its memfd quota).
  struct DropTokens {
    MemfdRegistry* memfds;
    const v1::SubmitJobRequest* request;
    ~DropTokens() {
      for (const v1::ImageData* image : {&request->source(), &request->target(),
                                         &request->options().reference()}) {
        if (image->has_memfd()) memfds->Remove(image->memfd().token());
      }
    }
  } drop_tokens{memfds_, request};
  auto cred = Authorize(ctx);
  if (!cred.ok() || jobs_ == nullptr) {
    reactor->Finish(cred.ok() ? UnimplementedStatus("SubmitJob", kNoPipeline)
                              : ToGrpcStatus(cred.status()));
    return reactor;
  }
  jobs::JobSpec spec;
  spec.owner_uid = cred->uid;
  spec.priority = ToPriority(request->options().priority());
  spec.options = request->options();
  if (spec.options.reference().has_memfd()) {  // journal the reference's bytes, not a token
    auto reference = ImageBytes(spec.options.reference(), cred->uid, "reference");
    if (!reference.ok()) {
      reactor->Finish(ToGrpcStatus(reference.status()));
      return reactor;
    }
    spec.options.mutable_reference()->set_inline_bytes(*std::move(reference));
  }
  auto source = ImageBytes(request->source(), cred->uid, "source");
  auto target = source.ok() ? ImageBytes(request->target(), cred->uid, "target") : source;
  if (!target.ok()) {
    reactor->Finish(ToGrpcStatus(target.status()));
    return reactor;
  }
  spec.source_image = *std::move(source);
  spec.target_image = *std::move(target);
  // The plan and the journal's write (its input files fsynced) run on the submit thread, not
  // on gRPC's: the reactor answers from there.
  submits_.Post([this, reactor, response, spec = std::move(spec)]() mutable {
    auto job = jobs_->Submit(std::move(spec));
    if (job.ok()) *response->mutable_job() = *std::move(job);
    reactor->Finish(ToGrpcStatus(job.status()));
  });
  return reactor;
}

grpc::ServerWriteReactor<v1::JobEvent>* FusionService::WatchJob(grpc::CallbackServerContext* ctx,
                                                                const v1::WatchJobRequest* request) {
  auto cred = Authorize(ctx);
  if (!cred.ok()) return new FinishedStream<v1::JobEvent>(ToGrpcStatus(cred.status()));
  if (jobs_ == nullptr) return new FinishedStream<v1::JobEvent>(UnimplementedStatus("WatchJob", kNoPipeline));
  auto slot = watch_slots_.Acquire(cred->uid, "WatchJob");
  if (!slot.ok()) return new FinishedStream<v1::JobEvent>(ToGrpcStatus(slot.status()));
  return new WatchReactor(jobs_, request->job_id(), cred->uid, *std::move(slot));
}

grpc::ServerUnaryReactor* FusionService::GetJob(grpc::CallbackServerContext* ctx,
                                                const v1::GetJobRequest* request, v1::Job* response) {
  auto* reactor = ctx->DefaultReactor();
  auto cred = Authorize(ctx);
  if (!cred.ok() || jobs_ == nullptr) {
    reactor->Finish(cred.ok() ? UnimplementedStatus("GetJob", kNoPipeline) : ToGrpcStatus(cred.status()));
    return reactor;
  }
  auto job = jobs_->Get(request->job_id(), cred->uid);
  if (job.ok()) *response = *std::move(job);
  reactor->Finish(ToGrpcStatus(job.status()));
  return reactor;
}

grpc::ServerUnaryReactor* FusionService::ListJobs(grpc::CallbackServerContext* ctx,
                                                  const v1::ListJobsRequest* request,
                                                  v1::ListJobsResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  auto cred = Authorize(ctx);
  if (!cred.ok() || jobs_ == nullptr) {
    reactor->Finish(cred.ok() ? UnimplementedStatus("ListJobs", kNoPipeline) : ToGrpcStatus(cred.status()));
    return reactor;
  }
  auto states = ListJobsStates(*request);
  if (!states.ok()) {
    reactor->Finish(ToGrpcStatus(states.status()));
    return reactor;
  }
  if (request->all_uids()) {
    if (absl::Status admin = AuthorizeAdmin(ctx, *cred, "ListJobs(all_uids)"); !admin.ok()) {
      reactor->Finish(ToGrpcStatus(admin));
      return reactor;
    }
  }
  auto jobs = request->all_uids() ? jobs_->ListAll(*states, request->limit())
                                  : jobs_->List(cred->uid, *states, request->limit());
  if (jobs.ok() && request->all_uids()) {
    spdlog::info("uid {} pid {} (admin) listed every uid's jobs: {}", cred->uid, cred->pid, jobs->size());
  }
  if (jobs.ok()) {
    for (auto& j : *jobs) *response->add_jobs() = std::move(j);
  }
  reactor->Finish(ToGrpcStatus(jobs.status()));
  return reactor;
}

grpc::ServerUnaryReactor* FusionService::CancelJob(grpc::CallbackServerContext* ctx,
                                                   const v1::CancelJobRequest* request,
                                                   v1::Job* response) {
  auto* reactor = ctx->DefaultReactor();
  auto cred = Authorize(ctx);
  if (!cred.ok() || jobs_ == nullptr) {
    reactor->Finish(cred.ok() ? UnimplementedStatus("CancelJob", kNoPipeline) : ToGrpcStatus(cred.status()));
    return reactor;
  }
  auto job = jobs_->Cancel(request->job_id(), cred->uid);
  // Another uid's job: an admin (an operator stopping a runaway job) may cancel it too.
  if (absl::IsNotFound(job.status()) && IsAdmin(ctx, *cred)) {
    job = jobs_->Cancel(request->job_id(), cred->uid, /*operator_override=*/true);
    if (job.ok()) {
      spdlog::warn("uid {} pid {} (admin) cancelled job {} of uid {} (now {})", cred->uid, cred->pid,
                   request->job_id(), job->owner_uid(), v1::JobState_Name(job->state()));
    }
  }
  if (job.ok()) *response = *std::move(job);
  reactor->Finish(ToGrpcStatus(job.status()));
  return reactor;
}

grpc::ServerUnaryReactor* FusionService::GetJobResult(grpc::CallbackServerContext* ctx,
                                                      const v1::GetJobResultRequest* request,
                                                      v1::JobResult* response) {
  auto* reactor = ctx->DefaultReactor();
  auto cred = Authorize(ctx);
  if (!cred.ok() || jobs_ == nullptr) {
    reactor->Finish(cred.ok() ? UnimplementedStatus("GetJobResult", kNoPipeline) : ToGrpcStatus(cred.status()));
    return reactor;
  }
  auto result = jobs_->Result(request->job_id(), cred->uid);
  if (!result.ok()) {
    reactor->Finish(ToGrpcStatus(result.status()));
    return reactor;
  }
  if (!response->ParseFromString(result->report)) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INTERNAL,
                                 absl::StrCat("job '", request->job_id(), "': stored report unreadable")));
    return reactor;
  }
  if (!result->file.empty()) {  // a video result: a file in the state directory
    absl::Status st = FileResult(*result, *request, cred->uid, response);
    reactor->Finish(ToGrpcStatus(st));
    return reactor;
  }
  if (!request->require_inline() &&
      (request->prefer_memfd() || result->image.size() > options_.inline_result_max_bytes)) {
    auto token = memfds_->Publish(result->image, cred->uid);
    if (!token.ok()) {
      reactor->Finish(ToGrpcStatus(token.status()));
      return reactor;
    }
    response->mutable_image()->mutable_memfd()->set_token(*token);
    response->mutable_image()->mutable_memfd()->set_size_bytes(result->image.size());
  } else {
    response->mutable_image()->set_inline_bytes(std::move(result->image));
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace fusion
