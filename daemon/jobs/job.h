// Job: one face-fusion request and its life.
//
//            Submit (journaled)
//                  |
//                  v
//   +-------->  QUEUED  ---- Cancel ----------------------+
//   | restart      |                                      |
//   | (crash       | picked by the FairQueue              v
//   |  recovery)   v                                  CANCELLED
//   +--------  RUNNING(stage) ---- Cancel (at the next face, tile, detection pass or stage)
//                  |
//          +-------+--------+
//          v                v
//      SUCCEEDED          FAILED
//
// A RUNNING job found in the journal at start-up (the daemon died under it, or stopped and
// interrupted it after its drain deadline) goes back to QUEUED and runs again; SUCCEEDED,
// FAILED and CANCELLED are final.
// Thread-safety: plain value types.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "fusion/v1/fusion.pb.h"
#include "jobs/job_plan.h"

namespace fusion::jobs {

// A job's state is fusion.v1.JobState itself (proto/fusion/v1/fusion.proto): QUEUED, RUNNING,
// SUCCEEDED, FAILED, CANCELLED; v1::JobState_Name gives its name. A JobRecord never holds
// JOB_STATE_UNSPECIFIED. The journal and the end ledger store the numeric value, so a state's
// number in the proto must never change.
using JobState = v1::JobState;

// SUCCEEDED, FAILED or CANCELLED: the job's end, never left.
bool IsFinal(JobState state);

enum class Priority : int { kLow = 1, kNormal = 2, kHigh = 3 };

// What a job asks for, as accepted (validated) at submit.
struct JobSpec {
  uid_t owner_uid = 0;
  Priority priority = Priority::kNormal;
  v1::JobOptions options;      // as the client sent them (the reference's bytes inline)
  std::string source_image;   // encoded image bytes (PNG/JPEG/...)
  std::string target_image;   // encoded image bytes
};

// A job as the journal knows it.
struct JobRecord {
  std::string id;
  uid_t owner_uid = 0;
  JobState state = JobState::QUEUED;
  Priority priority = Priority::kNormal;
  JobPlan plan;  // made at submit (JobRunner::Plan); result_bound_bytes is not journalled
  int64_t created_unix_ms = 0;
  int64_t started_unix_ms = 0;
  int64_t finished_unix_ms = 0;
  int32_t error_code = 0;     // google.rpc.Code of a FAILED/CANCELLED job
  std::string error_message;
  std::string error_stage;    // the stage a FAILED/CANCELLED job ended in; "" before any
  int64_t sequence = 0;       // submit order, strictly increasing across restarts
};

}  // namespace fusion::jobs
