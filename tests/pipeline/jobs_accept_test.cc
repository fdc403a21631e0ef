// The job service's acceptance through the real binaries: fusiond with the pipeline and fusionctl
// run as other uids (raw uids 65534 and 65533 in the socket's group, 65532 in the group but not
// allowed), concurrent jobs of two clients, ownership, cancel of a running job, kill -9 and restart
// on the same journal, SIGTERM past the drain and restart, the 11-megapixel mosaic by memfd. Tests
// that switch uids skip when not root.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

#include "process.h"
#include "temp_dir.h"

namespace fusion {
namespace {

using testing::Process;
using testing::RunResult;

constexpr int kNogroup = 65534;
constexpr int kUidA = 65534;        // nobody, primary group nogroup
constexpr int kUidB = 65533;        // a raw uid, run with gid nogroup
constexpr int kOutsider = 65532;    // in the socket's group, not in allowed_uids
constexpr char kAstronaut[] = FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png";
constexpr char kHopper[] = FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// One set of swap options; the same set always gives the same bytes.
struct Swap {
  const char* source;
  const char* target;
  const char* ratio;
};
const Swap kSwaps[2] = {{kAstronaut, kHopper, "1"}, {kHopper, kAstronaut, "0.6"}};

class JobsAcceptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    chmod(dir_.path().c_str(), 0755);
    mkdir(out_.c_str(), 0777);
    chmod(out_.c_str(), 0777);  // other uids write their results here
    std::ofstream(toml_) << "socket_group = \"nogroup\"\nallowed_uids = [" << kUidA << ", " << kUidB
                         << "]\n";
  }
  // Starts fusiond on `state` and waits until it answers (a killed daemon leaves its socket file).
  std::unique_ptr<Process> StartDaemon(const std::string& state) {
    auto p = std::make_unique<Process>(
        std::vector<std::string>{FUSIOND_BIN, "--socket", socket_, "--device", "cpu", "--device-memory-limit",
                                 "1GiB", "--state-dir", state, "--models-dir", FUSION_MODELS_DIR, "--config",
                                 toml_},
        dir_.path());
    EXPECT_TRUE(testing::WaitFor(
        [&] { return !p->Running() || Ctl({"health"}).exit_code == 0; }, absl::Seconds(30)));
    return p;
  }
  void Stop(std::unique_ptr<Process> daemon) {
    daemon->Signal(SIGTERM);
    EXPECT_EQ(daemon->Wait(absl::Seconds(20)).exit_code, 0);
  }
  std::vector<std::string> CtlArgv(std::vector<std::string> args) const {
    args.insert(args.begin(), {FUSIONCTL_BIN, "--socket", socket_, "--timeout-ms", "120000"});
    return args;
  }
  // fusionctl as `uid` (-1: this process's uid), with the socket's group as its gid.
  RunResult Ctl(std::vector<std::string> args, int uid = -1) {
    return testing::RunProcess(CtlArgv(std::move(args)), dir_.path(), absl::Seconds(120), uid, {}, kNogroup);
  }
  std::vector<std::string> SwapArgs(const Swap& s, const std::string& out, bool no_wait = false) const {
    std::vector<std::string> a = {"swap", "--source", s.source, "--target", s.target, "--ratio", s.ratio, "--json"};
    if (no_wait) a.push_back("--no-wait");
    else a.insert(a.end(), {"-o", out});
    return a;
  }
  std::string SubmitNoWait(const Swap& s, int uid = -1) {
    RunResult r = Ctl(SwapArgs(s, "", true), uid);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code != 0) return "";
    return nlohmann::json::parse(r.out)["job_id"].get<std::string>();
  }
  nlohmann::json Job(const std::string& id, int uid = -1) {
    RunResult r = Ctl({"job", id, "--json"}, uid);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json{{"state", "?"}};
  }
  nlohmann::json Mem() {
    RunResult r = Ctl({"mem", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  }
  static int Leases(const nlohmann::json& mem) {
    int n = 0;
    for (const auto& m : mem["models"]) n += m["leases"].get<int>();
    return n;
  }
  // The reference image of `s`: the job run alone on the daemon.
  std::string Alone(const Swap& s, const std::string& name) {
    const RunResult r = Ctl(SwapArgs(s, dir_.File(name)));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    if (r.exit_code == 0) EXPECT_TRUE(nlohmann::json::parse(r.out)["degradations"].empty());
    return ReadFile(dir_.File(name));
  }

  testing::TempDir dir_;
  const std::string socket_ = dir_.File("f.sock");
  const std::string out_ = dir_.File("out");
  const std::string toml_ = dir_.File("fusiond.toml");
};

TEST_F(JobsAcceptTest, TwoUidsTenJobsEachAllSucceedIdenticalToTheJobRunAlone) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run clients as other uids";
  auto daemon = StartDaemon(dir_.File("state"));
  ASSERT_TRUE(daemon->Running());
  std::vector<std::pair<int, std::unique_ptr<Process>>> clients;
  for (int i = 0; i < 10; ++i) {
    for (int uid : {kUidA, kUidB}) {
      const std::string out = absl::StrCat(out_, "/", uid, "_", i, ".png");
      clients.emplace_back(i % 2, std::make_unique<Process>(CtlArgv(SwapArgs(kSwaps[i % 2], out)), dir_.path(),
                                                            uid, std::vector<std::string>{}, kNogroup));
    }
  }
  std::vector<RunResult> results;
  for (auto& [which, p] : clients) results.push_back(p->Wait(absl::Seconds(120)));
  const std::string alone[2] = {Alone(kSwaps[0], "alone0.png"), Alone(kSwaps[1], "alone1.png")};
  ASSERT_GT(alone[0].size(), 1000u);
  ASSERT_GT(alone[1].size(), 1000u);
  ASSERT_NE(alone[0], alone[1]);
  for (size_t k = 0; k < clients.size(); ++k) {
    const int i = static_cast<int>(k / 2), uid = k % 2 == 0 ? kUidA : kUidB;
    ASSERT_EQ(results[k].exit_code, 0) << "uid " << uid << " job " << i << ": " << results[k].err;
    const nlohmann::json r = nlohmann::json::parse(results[k].out);
    EXPECT_EQ(r["state"], "SUCCEEDED");
    EXPECT_TRUE(r["degradations"].empty()) << r["degradations"];
    EXPECT_TRUE(ReadFile(absl::StrCat(out_, "/", uid, "_", i, ".png")) == alone[i % 2])
        << "uid " << uid << " job " << i << " differs from the job run alone";
  }
  // Each uid sees exactly its own ten jobs, all SUCCEEDED.
  for (int uid : {kUidA, kUidB}) {
    const RunResult listed = Ctl({"jobs", "--json"}, uid);
    ASSERT_EQ(listed.exit_code, 0) << listed.err;
    const nlohmann::json jobs = nlohmann::json::parse(listed.out);
    EXPECT_EQ(jobs.size(), 10u) << "uid " << uid;
    for (const auto& j : jobs) {
      EXPECT_EQ(j["owner_uid"].get<int>(), uid);
      EXPECT_EQ(j["state"], "SUCCEEDED");
    }
  }
  Stop(std::move(daemon));
}

TEST_F(JobsAcceptTest, OtherUidsJobIsNotFoundAndAUidOutsideTheAllowedSetIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run clients as other uids";
  auto daemon = StartDaemon(dir_.File("state"));
  ASSERT_TRUE(daemon->Running());
  const std::string id = SubmitNoWait(kSwaps[0], kUidA);
  ASSERT_FALSE(id.empty());
  ASSERT_TRUE(testing::WaitFor([&] { return Job(id, kUidA)["state"] == "SUCCEEDED"; }, absl::Seconds(60)));
  const std::string mine = out_ + "/mine.png";
  ASSERT_EQ(Ctl({"result", id, "-o", mine}, kUidA).exit_code, 0);  // the owner gets it
  EXPECT_GT(ReadFile(mine).size(), 1000u);

  const std::string theirs = out_ + "/theirs.png";
  for (std::vector<std::string> call : {std::vector<std::string>{"job", id}, {"result", id, "-o", theirs},
                                        {"cancel", id}}) {
    const RunResult r = Ctl(call, kUidB);
    EXPECT_EQ(r.exit_code, 1) << call[0];
    EXPECT_NE(r.err.find("NOT_FOUND"), std::string::npos) << call[0] << ": " << r.err;
    EXPECT_EQ(r.err.find(".png"), std::string::npos) << "leaks nothing of the job: " << r.err;
  }
  EXPECT_NE(access(theirs.c_str(), F_OK), 0);
  for (std::vector<std::string> call : {std::vector<std::string>{"job", id}, {"mem"}}) {
    const RunResult r = Ctl(call, kOutsider);
    EXPECT_EQ(r.exit_code, 1) << call[0];
    EXPECT_NE(r.err.find("PERMISSION_DENIED: uid 65532 is not allowed"), std::string::npos) << r.err;
  }
  Stop(std::move(daemon));
}

TEST_F(JobsAcceptTest, RunningJobCancelledEndsCancelledAndReturnsItsLeases) {
  auto daemon = StartDaemon(dir_.File("state"));
  ASSERT_TRUE(daemon->Running());
  const nlohmann::json before = Mem();
  ASSERT_EQ(Leases(before), 0);
  // A whole-frame upscale x2 of the 1920x1280 group photo (~600 ESRGAN tiles) keeps the job
  // running for seconds, so it is cancelled while it still has work to do (Grace with enhance x4
  // could end between the RUNNING poll and the cancel once SSD and ESRGAN ran in bf16).
  RunResult submitted = Ctl({"swap", "--source", kAstronaut, "--target", FUSION_FETCHED_TESTDATA_DIR "/faces/sample1.jpg",
                             "--upscale", "x2", "--no-wait"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string id(absl::StripAsciiWhitespace(submitted.out));
  ASSERT_TRUE(testing::WaitFor([&] { return Job(id)["state"] != "QUEUED"; }, absl::Seconds(30)));
  const nlohmann::json running = Job(id);
  ASSERT_EQ(running["state"], "RUNNING") << running.dump();
  const RunResult cancelled = Ctl({"cancel", id, "--json"});
  ASSERT_EQ(cancelled.exit_code, 0) << cancelled.err;
  // `cancel` waits briefly for the job's next checkpoint; a job still running says so.
  const nlohmann::json answer = nlohmann::json::parse(cancelled.out);
  EXPECT_TRUE(answer["state"] == "CANCELLED" || answer["cancel_requested"].get<bool>()) << answer.dump();
  ASSERT_TRUE(testing::WaitFor([&] { return Job(id)["state"] != "RUNNING"; }, absl::Seconds(60)));
  const nlohmann::json done = Job(id);
  EXPECT_EQ(done["state"], "CANCELLED") << done.dump();
  EXPECT_EQ(done["error_code"].get<int>(), 1);  // CANCELLED
  EXPECT_EQ(done["error_message"].get<std::string>().rfind("job cancelled ", 0), 0u) << done.dump();
  EXPECT_EQ(Ctl({"result", id, "-o", dir_.File("none.png")}).exit_code, 1);
  const nlohmann::json after = Mem();
  EXPECT_EQ(Leases(after), 0);
  EXPECT_EQ(after["device"]["reserved_bytes"].get<uint64_t>(), before["device"]["reserved_bytes"].get<uint64_t>());
  EXPECT_EQ(after["device"]["reserved_bytes"].get<uint64_t>(), 0u);
  // Only the source-face cache's slabs (reported apart) stay reserved on the host tier.
  EXPECT_EQ(after["host"]["reserved_bytes"].get<uint64_t>(), after["host"]["cache_bytes"].get<uint64_t>());
  for (const auto& c : after["clients"]) {
    EXPECT_EQ(c["working_bytes"].get<uint64_t>(), 0u) << c.dump();
    EXPECT_EQ(c["jobs_running"].get<int>(), 0) << c.dump();
  }
  Stop(std::move(daemon));
}

// Rows of the journal per job id, and how many of them hold a result image.
std::map<std::string, std::pair<int, int>> JournalRows(const std::string& path) {
  std::map<std::string, std::pair<int, int>> rows;
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return rows;
  }
  sqlite3_stmt* st = nullptr;
  // A result is an image in the row or a file the row names (fusiond keeps image results as
  // files under results/).
  sqlite3_prepare_v2(db,
                     "SELECT id, (result_image IS NOT NULL AND length(result_image) > 0) OR "
                     "(result_file IS NOT NULL AND length(result_file) > 0) FROM jobs",
                     -1, &st, nullptr);
  while (st != nullptr && sqlite3_step(st) == SQLITE_ROW) {
    auto& r = rows[reinterpret_cast<const char*>(sqlite3_column_text(st, 0))];
    ++r.first;
    r.second += sqlite3_column_int(st, 1);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

// The journal state of job `id` (jobs::JobState: 2 RUNNING, 3 SUCCEEDED), or -1.
int JournalState(const std::string& path, const std::string& id) {
  sqlite3* db = nullptr;
  int state = -1;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK &&
      sqlite3_prepare_v2(db, "SELECT state FROM jobs WHERE id = ?", -1, &st, nullptr) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, id.c_str(), -1, SQLITE_TRANSIENT);
    if (sqlite3_step(st) == SQLITE_ROW) state = sqlite3_column_int(st, 0);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return state;
}

TEST_F(JobsAcceptTest, SigtermPastTheDrainInterruptsTheRunningJobAndTheNextStartRunsItOnce) {
  std::ofstream(toml_, std::ios::app) << "drain_ms = 0\n";  // interrupt at once
  const std::string state = dir_.File("state");
  auto daemon = StartDaemon(state);
  ASSERT_TRUE(daemon->Running());
  // A whole-frame upscale x2 of the 1920x1280 group photo (~600 ESRGAN tiles of 64 px) keeps the
  // job running for seconds after it starts. Grace with enhance x4 and upscale x4 no longer did
  // once ESRGAN ran in bf16: it could end between two polls.
  RunResult submitted = Ctl({"swap", "--source", kAstronaut, "--target", FUSION_FETCHED_TESTDATA_DIR "/faces/sample1.jpg",
                             "--upscale", "x2", "--no-wait"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string id(absl::StripAsciiWhitespace(submitted.out));
  ASSERT_TRUE(testing::WaitFor([&] { return Job(id)["state"] != "QUEUED"; }, absl::Seconds(30)));
  ASSERT_EQ(Job(id)["state"], "RUNNING");
  Stop(std::move(daemon));  // SIGTERM: exit 0
  // Interrupted, not cancelled: RUNNING in the journal, no result.
  EXPECT_EQ(JournalState(state + "/journal.sqlite3", id), 2);
  EXPECT_EQ(JournalRows(state + "/journal.sqlite3").at(id), (std::pair<int, int>{1, 0}));

  auto restarted = StartDaemon(state);
  ASSERT_TRUE(restarted->Running());
  ASSERT_TRUE(testing::WaitFor([&] { return Job(id)["state"] == "SUCCEEDED"; }, absl::Seconds(60)))
      << Job(id).dump();
  ASSERT_EQ(Ctl({"result", id, "-o", dir_.File("after_restart.png")}).exit_code, 0);
  EXPECT_GT(ReadFile(dir_.File("after_restart.png")).size(), 1000u);
  Stop(std::move(restarted));
  EXPECT_EQ(JournalRows(state + "/journal.sqlite3").at(id), (std::pair<int, int>{1, 1}));
}

TEST_F(JobsAcceptTest, KillNineWhileRunningThenRestartEveryJobSucceedsOnceWithOneResult) {
  const std::string state = dir_.File("state");
  auto daemon = StartDaemon(state);
  ASSERT_TRUE(daemon->Running());
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(SubmitNoWait(kSwaps[0]));
  ASSERT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 10u);
  auto states = [&] {
    std::map<std::string, std::string> out;
    const RunResult r = Ctl({"jobs", "--json"});
    if (r.exit_code != 0) return out;
    for (const auto& j : nlohmann::json::parse(r.out)) out[j["job_id"]] = j["state"];
    return out;
  };
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        for (const auto& [id, s] : states()) if (s == "RUNNING") return true;
        return false;
      },
      absl::Seconds(30)));
  // `mem` per uid: queued and running jobs from the job queue (concurrency limit 2).
  const nlohmann::json mem = Mem();
  ASSERT_EQ(mem["clients"].size(), 1u) << mem["clients"].dump();
  const nlohmann::json& me = mem["clients"][0];
  EXPECT_EQ(me["uid"].get<uint32_t>(), geteuid());
  EXPECT_GE(me["jobs_running"].get<int>(), 1);
  EXPECT_LE(me["jobs_running"].get<int>(), 2);
  EXPECT_GE(me["jobs_queued"].get<int>(), 1);
  EXPECT_LE(me["jobs_queued"].get<int>() + me["jobs_running"].get<int>(), 10);
  daemon->Signal(SIGKILL);
  EXPECT_EQ(daemon->Wait(absl::Seconds(10)).exit_code, 128 + SIGKILL);
  const std::map<std::string, std::string> at_kill = [&] {
    std::map<std::string, std::string> out;
    for (const auto& [id, n] : JournalRows(state + "/journal.sqlite3")) out[id] = n.second > 0 ? "done" : "open";
    return out;
  }();
  ASSERT_EQ(at_kill.size(), 10u);
  int open = 0;
  for (const auto& [id, s] : at_kill) open += s == "open";
  EXPECT_GE(open, 1) << "the kill came after every job had finished";

  auto restarted = StartDaemon(state);
  ASSERT_TRUE(restarted->Running());
  ASSERT_TRUE(testing::WaitFor(
      [&] {
        const auto s = states();
        if (s.size() != 10) return false;
        for (const auto& [id, st] : s) if (st != "SUCCEEDED") return st == "FAILED" || st == "CANCELLED";
        return true;
      },
      absl::Seconds(120)));
  const auto final_states = states();
  ASSERT_EQ(final_states.size(), 10u);
  const std::string alone = Alone(kSwaps[0], "alone.png");
  for (const std::string& id : ids) {
    EXPECT_EQ(final_states.at(id), "SUCCEEDED") << id;
    const std::string out = dir_.File(id + ".png");
    ASSERT_EQ(Ctl({"result", id, "-o", out}).exit_code, 0) << id;
    EXPECT_TRUE(ReadFile(out) == alone) << id << " differs from the job run alone";
  }
  Stop(std::move(restarted));
  // One journal row per job and exactly one result each (plus the reference job).
  const auto rows = JournalRows(state + "/journal.sqlite3");
  EXPECT_EQ(rows.size(), 11u);
  for (const std::string& id : ids) {
    ASSERT_EQ(rows.count(id), 1u) << id;
    EXPECT_EQ(rows.at(id), (std::pair<int, int>{1, 1})) << id;
  }
}

TEST_F(JobsAcceptTest, ElevenMegapixelMosaicTravelsByMemfdBothWays) {
  const std::string mosaic = FUSION_FETCHED_TESTDATA_DIR "/faces/mosaic_3840x2896.jpg";
  ASSERT_EQ(access(mosaic.c_str(), R_OK), 0) << mosaic << " (scripts/fetch-models.sh)";
  const uint64_t mosaic_bytes = ReadFile(mosaic).size();
  auto daemon = StartDaemon(dir_.File("state"));
  ASSERT_TRUE(daemon->Running());
  // The JPEG (about 1.4 MB) is under the 4 MiB default: a 1 MiB threshold sends it by memfd, while
  // the 512-pixel source stays inline. The 11-megapixel PNG result is over the daemon's 4 MiB
  // inline limit, so it comes back by memfd. --min-face-px 120: its faces are 190-300 px, and
  // the transport, not the scan, is under test.
  const RunResult r = Ctl({"--memfd-threshold", "1MiB", "swap", "--source", kAstronaut, "--target", mosaic, "-o",
                           dir_.File("mosaic.png"), "--max-side", "640", "--min-face-px", "120", "--simple", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["state"], "SUCCEEDED");
  EXPECT_EQ(j["width"].get<int>(), 3840);
  EXPECT_EQ(j["height"].get<int>(), 2896);
  EXPECT_TRUE(j["image_by_memfd"].get<bool>());
  const uint64_t png_bytes = ReadFile(dir_.File("mosaic.png")).size();
  EXPECT_GT(png_bytes, 4ull << 20);
  EXPECT_EQ(j["image_bytes"].get<uint64_t>(), png_bytes);
  const nlohmann::json& t = j["transfer"];
  EXPECT_EQ(t["images_by_memfd"].get<int>(), 2) << t.dump();  // the mosaic out, the result back
  EXPECT_EQ(t["bytes_by_memfd"].get<uint64_t>(), mosaic_bytes + png_bytes) << t.dump();
  EXPECT_EQ(t["images_inline"].get<int>(), 1) << t.dump();    // the source
  EXPECT_EQ(t["bytes_inline"].get<uint64_t>(), ReadFile(kAstronaut).size());
  Stop(std::move(daemon));
}

}  // namespace
}  // namespace fusion
