// Trace replay for bench/residency_trace: drives the real ResidencyManager and eviction policy
// with a fake loader over a JSON Lines trace (format: the structs below, written by
// bench/gen_trace.py; rules below).
//
// Replay rules: sequential. The clock starts at the first arrival's t. Before each turn, every
// job with t <= clock joins the queue; free active slots (concurrency C) are filled from the
// queue in arrival order, each new job joining the end of the rotation; if nothing is active
// the clock jumps to the next arrival. The job at the front of the rotation runs one stage
// (Acquire model + working bytes, then release), the clock advances by 1, and the job goes to
// the back unless that was its last stage. A stage whose model + working bytes exceed the
// budget minus pinned bytes is not run, counts once in `refused`, and still takes its turn.
// The order of stages depends on the trace alone, so every policy sees the same sequence.
// Future references: lookahead and planner see the active jobs' remaining stages plus the first
// K queued jobs (never a job that has not arrived), distances in turns of this rotation, and
// the same as a request sequence (FutureReferences::Sequence, a new version every turn; the
// manager's PrepareEviction runs before each turn, as fusiond runs it after a queue change);
// belady/belady-bytes and planner-offline (the planner fed the whole schedule as its sequence)
// see the whole schedule.
// Thread-safety: single-threaded.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "memory/future_references.h"

namespace fusion::bench {

struct TraceModel {
  std::string name;
  uint64_t bytes = 0;
  bool pinned = false;
};
struct TraceStage {
  std::string model;
  uint64_t working_bytes = 0;
};
struct TraceJob {
  int64_t t = 0;
  std::string client, job;
  std::vector<TraceStage> stages;
};
struct Trace {
  std::vector<TraceModel> models;
  std::vector<TraceJob> jobs;  // arrival order
};

// INVALID_ARGUMENT naming the line on malformed JSON or missing fields.
absl::StatusOr<Trace> ParseTrace(const std::string& jsonl);

// One turn of the replay, for bench/residency_opt.py (residency_trace --dump-requests).
struct ReplayRequest {
  size_t turn = 0;
  std::string model;
  uint64_t bytes = 0, working_bytes = 0;
  bool pinned = false;
  bool fits = false;   // false: refused (model + working set + other pins > budget)
  size_t arrived = 0;  // jobs arrived so far (admitted to the queue) at this turn
  // Set on the turns where `arrived` grew (and the first): the rotation's forecast then, which
  // is the future a queue-only policy can see until the next arrival. Empty otherwise.
  FutureSequence forecast;
};

struct ReplayOptions {
  std::string policy = "default";
  uint64_t budget_bytes = 0;
  int concurrency = 2;
  int lookahead_jobs = -1;  // queued jobs lookahead sees; -1 = all
  std::vector<ReplayRequest>* requests = nullptr;  // when set, every turn is appended
};

struct ReplayResult {
  uint64_t bytes_uploaded = 0, loads = 0, evictions = 0, peak_bytes = 0, refused = 0;
};

// INVALID_ARGUMENT for an unknown policy or model; INTERNAL if the manager refuses a stage the
// rules say fits (a bug).
absl::StatusOr<ReplayResult> Replay(const Trace& trace, const ReplayOptions& options);

}  // namespace fusion::bench
