// The daemon's eviction choice follows the job queue: a case where LRU would evict `b` but the
// queued job still needs it, so fusiond evicts `a` (seen in GetMemoryState). Fake weights: a
// runner that only takes residency leases, over a fake loader.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "fake_loader.h"
#include "fusion/v1/fusion.grpc.pb.h"
#include "jobs/job_runner.h"
#include "memory/residency_manager.h"
#include "notification.h"
#include "process.h"
#include "daemon.h"
#include "test_backend.h"
#include "temp_dir.h"

namespace fusion {
namespace {

constexpr uint64_t MiB = 1ull << 20;

// Stages = the models listed in options.enhance_model ("a,b"): each stage holds a lease on its
// model for the stage. Runs wait for `gate` before their first stage when it is set.
class LeasingRunner final : public jobs::JobRunner {
 public:
  absl::StatusOr<jobs::JobPlan> Plan(const v1::JobOptions& o, const std::string&, const std::string&) override {
    // The images are placeholders: Run never reads them; its result is "ok" (2 bytes).
    return jobs::JobPlan{.options = o, .target = v1::IMAGE,
                         .stage_models = std::vector<std::string>(absl::StrSplit(o.enhance_model(), ',')),
                         .result_bound_bytes = 2};
  }
  absl::StatusOr<Output> Run(const jobs::JobRecord& job, const std::string&, const std::string&,
                             Context& ctx) override {
    while (gate != nullptr && !gate->HasBeenNotified()) absl::SleepFor(absl::Milliseconds(1));
    for (const std::string& model : job.plan.stage_models) {
      if (ctx.Cancelled()) return absl::CancelledError("cancelled");
      ctx.StageStarted(model, 0);
      {
        auto lease = residency->Acquire({job.id, job.owner_uid}, model, 0,
                                        absl::Now() + absl::Seconds(10));
        if (!lease.ok()) return lease.status();
      }
      v1::StageReport report;
      report.set_name(model);
      report.set_model(model);  // the job manager advances the job's remaining stages by it
      ctx.StageFinished(report, 1);
    }
    Output out;
    out.image = "ok";
    return out;
  }
  ResidencyManager* residency = nullptr;
  Notification* gate = nullptr;
};

TEST(LookaheadInTheDaemon, EvictsTheModelNoQueuedJobNeedsNotTheLeastRecentlyUsed) {
  testing::TempDir dir;
  DaemonConfig config;
  config.socket = dir.File("f.sock");
  config.state_dir = dir.File("state");
  config.device_memory_limit = 100 * MiB;  // two of the three 40 MiB models fit
  config.device_memory_reserve = 0;
  config.max_concurrent_jobs = 1;
  config.one_shot_min_free = 0;
  testing::FakeLoader loader;
  LeasingRunner runner;
  auto backend = std::make_unique<testing::TestBackend>();
  backend->model_loader = &loader;
  backend->start = [&](ResidencyManager& rm) -> absl::StatusOr<jobs::JobRunner*> {
    for (const char* m : {"a", "b", "c"}) {
      loader.SetBytes(m, 40 * MiB);
      if (auto st = rm.RegisterModel({m, 40 * MiB}); !st.ok()) return st;
    }
    runner.residency = &rm;
    return &runner;
  };
  auto server = Daemon::Create(config, std::move(backend));
  ASSERT_TRUE(server.ok()) << server.status();
  // Raw stubs: this file also includes the daemon's residency headers.
  auto stub = v1::Fusion::NewStub(
      grpc::CreateChannel("unix://" + config.socket, grpc::InsecureChannelCredentials()));
  auto run = [&](const std::string& models) {
    grpc::ClientContext ctx;
    v1::SubmitJobRequest request;
    request.mutable_source()->set_inline_bytes("s");
    request.mutable_target()->set_inline_bytes("t");
    request.mutable_options()->set_enhance_model(models);
    v1::SubmitJobResponse response;
    grpc::Status st = stub->SubmitJob(&ctx, request, &response);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return response.job().job_id();
  };
  auto wait_state = [&](const std::string& id, v1::JobState want) {
    return testing::WaitFor([&] {
      grpc::ClientContext ctx;
      v1::GetJobRequest request;
      request.set_job_id(id);
      v1::Job job;
      return stub->GetJob(&ctx, request, &job).ok() && job.state() == want;
    }, absl::Seconds(20));
  };

  // 1. b then a: both resident, b the least recently used.
  ASSERT_TRUE(wait_state(run("b,a"), v1::SUCCEEDED));
  // 2. A job needing c runs (held at the gate) while a job needing b waits in the queue.
  Notification gate;
  runner.gate = &gate;
  const std::string needs_c = run("c");
  ASSERT_TRUE(wait_state(needs_c, v1::RUNNING));
  const std::string needs_b = run("b");
  gate.Notify();
  ASSERT_TRUE(wait_state(needs_c, v1::SUCCEEDED));
  ASSERT_TRUE(wait_state(needs_b, v1::SUCCEEDED));

  // LRU would have evicted b (then reloaded it for the queued job); lookahead evicted a.
  grpc::ClientContext ctx;
  v1::MemoryState mem;
  ASSERT_TRUE(stub->GetMemoryState(&ctx, v1::GetMemoryStateRequest(), &mem).ok());
  std::map<std::string, v1::ModelInfo> models;
  for (const v1::ModelInfo& m : mem.models()) models[m.name()] = m;
  EXPECT_EQ(models["a"].state(), "HOST");
  EXPECT_EQ(models["a"].evictions(), 1u);
  EXPECT_EQ(models["b"].evictions(), 0u);
  EXPECT_EQ(models["b"].uploads(), 1u);  // never had to come back
  EXPECT_EQ(models["c"].tier(), "device");
  EXPECT_EQ(mem.counters().evictions(), 1u);
}

}  // namespace
}  // namespace fusion
