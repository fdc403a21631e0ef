// The fusion.v1 job methods over a real socket, with a scripted runner instead of the pipeline.
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "fusion/v1/fusion.grpc.pb.h"
#include "memfd_transfer.h"
#include "daemon.h"
#include "test_backend.h"
#include "scripted_runner.h"
#include "notification.h"
#include "process.h"
#include "temp_dir.h"

namespace fusion {
namespace {

class JobRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.socket = dir_.File("f.sock");
    config_.state_dir = dir_.File("state");
    config_.drain_ms = 100;
    auto server = Daemon::Create(config_, testing::RunnerBackend(&runner_));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    stub_ = v1::Fusion::NewStub(
        grpc::CreateChannel("unix://" + config_.socket, grpc::InsecureChannelCredentials()));
  }
  v1::Job Submit(v1::SubmitJobRequest request, grpc::Status* status = nullptr) {
    grpc::ClientContext ctx;
    v1::SubmitJobResponse response;
    grpc::Status st = stub_->SubmitJob(&ctx, request, &response);
    if (status != nullptr) *status = st;
    else EXPECT_TRUE(st.ok()) << st.error_message();
    return response.job();
  }
  static v1::SubmitJobRequest Inline(const std::string& source, const std::string& target) {
    v1::SubmitJobRequest r;
    r.mutable_source()->set_inline_bytes(source);
    r.mutable_target()->set_inline_bytes(target);
    r.mutable_options()->set_ratio(0.5f);
    return r;
  }

  testing::TempDir dir_;
  DaemonConfig config_;
  jobs::ScriptedRunner runner_;
  std::unique_ptr<Daemon> server_;
  std::unique_ptr<v1::Fusion::Stub> stub_;
};

TEST_F(JobRpcTest, SubmitWatchAndFetchTheResultInlineAndByMemfd) {
  Notification watching;  // the job runs once the watch is registered: else a loaded machine
  runner_.gate = &watching;  // can finish it first, and a finished job's watch is its end alone
  v1::Job job = Submit(Inline("source", "target"));
  EXPECT_EQ(job.state(), v1::QUEUED);
  ASSERT_FALSE(job.job_id().empty());

  grpc::ClientContext ctx;
  v1::WatchJobRequest watch;
  watch.set_job_id(job.job_id());
  auto reader = stub_->WatchJob(&ctx, watch);
  v1::JobEvent e;
  int events = 0, stage_finished = 0;
  v1::JobEvent last;
  ASSERT_TRUE(reader->Read(&e));  // the first event: sent once the watcher is registered
  EXPECT_FALSE(e.has_done());
  ++events;
  watching.Notify();
  while (reader->Read(&e)) {
    ++events;
    stage_finished += e.has_stage_finished();
    last = e;
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(last.has_done());
  EXPECT_EQ(last.done().job().state(), v1::SUCCEEDED);
  EXPECT_EQ(stage_finished, 2);

  grpc::ClientContext rctx;
  v1::GetJobResultRequest rreq;
  rreq.set_job_id(job.job_id());
  v1::JobResult result;
  ASSERT_TRUE(stub_->GetJobResult(&rctx, rreq, &result).ok());
  EXPECT_EQ(result.image().inline_bytes(), "tegrat6");
  EXPECT_EQ(result.job_id(), job.job_id());
  EXPECT_EQ(result.faces_swapped(), 1u);

  grpc::ClientContext mctx;
  rreq.set_prefer_memfd(true);
  ASSERT_TRUE(stub_->GetJobResult(&mctx, rreq, &result).ok());
  ASSERT_TRUE(result.image().has_memfd());
  EXPECT_EQ(result.image().memfd().size_bytes(), 7u);
  EXPECT_EQ(*internal::GetMemfd(config_.socket, result.image().memfd().token()), "tegrat6");
}

TEST_F(JobRpcTest, ImagesMayArriveAsMemfdTokensUsableOnce) {
  const std::string big(3 << 20, 'x');
  auto token = internal::PutMemfd(config_.socket, big);
  ASSERT_TRUE(token.ok()) << token.status();
  v1::SubmitJobRequest r = Inline("src", "");
  r.mutable_target()->mutable_memfd()->set_token(*token);
  v1::Job job = Submit(r);
  ASSERT_TRUE(testing::WaitFor([&] {
    grpc::ClientContext ctx;
    v1::GetJobRequest g;
    g.set_job_id(job.job_id());
    v1::Job j;
    return stub_->GetJob(&ctx, g, &j).ok() && j.state() == v1::SUCCEEDED;
  }, absl::Seconds(20)));
  grpc::Status st;
  Submit(r, &st);  // the token was consumed by the first submit
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("target image: memfd token"), std::string::npos) << st.error_message();
}

TEST_F(JobRpcTest, BadRequestsAreInvalidArgumentAndUnknownJobsNotFound) {
  grpc::Status st;
  Submit(Inline("", "t"), &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "source image: missing or empty");
  v1::SubmitJobRequest bad_ratio = Inline("s", "t");
  bad_ratio.mutable_options()->set_ratio(3);
  Submit(bad_ratio, &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  grpc::ClientContext ctx;
  v1::GetJobRequest g;
  g.set_job_id("j-0000000000000000");
  v1::Job j;
  EXPECT_EQ(stub_->GetJob(&ctx, g, &j).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext wctx;
  v1::WatchJobRequest w;
  w.set_job_id("j-0000000000000000");
  auto reader = stub_->WatchJob(&wctx, w);
  v1::JobEvent e;
  EXPECT_FALSE(reader->Read(&e));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(JobRpcTest, ListAndCancel) {
  runner_.stage_ms = 100;
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(Submit(Inline("s", "t")).job_id());
  grpc::ClientContext cctx;
  v1::CancelJobRequest c;
  c.set_job_id(ids.back());
  v1::Job cancelled;
  ASSERT_TRUE(stub_->CancelJob(&cctx, c, &cancelled).ok());
  EXPECT_EQ(cancelled.state(), v1::CANCELLED);
  grpc::ClientContext lctx;
  v1::ListJobsRequest l;
  l.add_states(v1::CANCELLED);
  v1::ListJobsResponse listed;
  ASSERT_TRUE(stub_->ListJobs(&lctx, l, &listed).ok());
  ASSERT_EQ(listed.jobs_size(), 1);
  EXPECT_EQ(listed.jobs(0).job_id(), ids.back());
}

TEST_F(JobRpcTest, RefusedSubmitStillUsesUpItsMemfdTokens) {
  auto token = internal::PutMemfd(config_.socket, std::string(1000, 'x'));
  ASSERT_TRUE(token.ok());
  v1::SubmitJobRequest r = Inline("s", "t");
  r.mutable_target()->mutable_memfd()->set_token(*token);
  r.mutable_options()->set_ratio(7);  // refused: invalid option
  grpc::Status st;
  Submit(r, &st);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  r.mutable_options()->set_ratio(0.5f);
  Submit(r, &st);  // the token is gone
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("not found"), std::string::npos) << st.error_message();
}

TEST(JobRpcWithoutPipeline, JobMethodsAreUnimplemented) {
  testing::TempDir dir;
  DaemonConfig config;
  config.socket = dir.File("f.sock");
  auto server = Daemon::Create(config, nullptr);
  ASSERT_TRUE(server.ok());
  auto stub = v1::Fusion::NewStub(
      grpc::CreateChannel("unix://" + config.socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::Job j;
  grpc::Status st = stub->GetJob(&ctx, v1::GetJobRequest(), &j);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(st.error_message().find("no pipeline is built"), std::string::npos);
}

// max_queued_jobs_per_uid reaches the queue: one job runs (held at the gate), two wait, the
// next is refused naming the limit.
TEST(JobRpc, QueuedJobsPerUidAreCappedByTheConfig) {
  testing::TempDir dir;
  DaemonConfig config;
  config.socket = dir.File("f.sock");
  config.state_dir = dir.File("state");
  config.drain_ms = 0;
  config.max_concurrent_jobs = 1;
  config.max_queued_jobs_per_uid = 2;
  jobs::ScriptedRunner runner;
  Notification gate;
  runner.gate = &gate;
  auto server = Daemon::Create(config, testing::RunnerBackend(&runner));
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = v1::Fusion::NewStub(grpc::CreateChannel("unix://" + config.socket, grpc::InsecureChannelCredentials()));
  auto submit = [&] {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest r;
    r.mutable_source()->set_inline_bytes("s");
    r.mutable_target()->set_inline_bytes("t");
    v1::SubmitJobResponse response;
    return stub->SubmitJob(&ctx, r, &response);
  };
  ASSERT_TRUE(submit().ok());
  ASSERT_TRUE(testing::WaitFor([&] { return runner.running.load() == 1; }, absl::Seconds(5)));
  EXPECT_TRUE(submit().ok());
  EXPECT_TRUE(submit().ok());
  const grpc::Status refused = submit();
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(refused.error_message(), absl::StrCat("uid ", getuid(), " already has 2 queued jobs (limit 2)"));
  gate.Notify();
}

}  // namespace
}  // namespace fusion
