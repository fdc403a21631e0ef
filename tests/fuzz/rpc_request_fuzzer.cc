// Fuzz target: the validation every fusion.v1 request message goes through before the daemon
// acts on it. The first byte picks the message, the rest is parsed as its wire format
// (ParseFromArray of arbitrary bytes, as gRPC hands it to the service); then the checks the
// service, the job manager and the JobRunner make on it run:
//   SubmitJobRequest      JobOptions (pipeline/job_options.h ValidateJobOptions against the
//                         source tree's catalogue), the source, target and reference images'
//                         headers (ScreenJobImages), the options' serialize/parse round trip
//                         the journal relies on;
//   ListJobsRequest       states (rpc/request_checks.h), then the journal's List with them and
//                         the limit;
//   Get/Watch/Cancel/GetJobResult requests: the job id through the journal's Get / GetResult;
//   ModelRequest          the name through the catalogue;
//   WatchMemoryRequest    the interval (MemoryWatchReactor::Interval).
// docs/FUZZING.md.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "fusion/v1/fusion.pb.h"
#include "fuzz_check.h"
#include "jobs/journal.h"
#include "models/catalogue/catalogue.h"
#include "pipeline/job_options.h"
#include "rpc/memory_watch.h"
#include "rpc/request_checks.h"

namespace {

using namespace fusion;

struct World {
  std::unique_ptr<models::ModelCatalogue> catalogue;
  std::unique_ptr<jobs::Journal> journal;
  std::string known_id;
};

World& TheWorld() {
  static World* world = [] {
    // protobuf logs every string field with invalid UTF-8 it parses (as the daemon does; it
    // only slows the fuzzer down and floods its output).
    google::protobuf::SetLogHandler(nullptr);
    auto* w = new World;
    std::ifstream in(FUSION_SOURCE_MANIFEST);
    std::stringstream text;
    text << in.rdbuf();
    auto catalogue = models::ModelCatalogue::FromJson(text.str(), FUSION_SOURCE_MANIFEST, "/nonexistent");
    FUZZ_CHECK(catalogue.ok());
    w->catalogue = *std::move(catalogue);
    static char dir[] = "/tmp/fusion-rpc-fuzz-XXXXXX";
    FUZZ_CHECK(mkdtemp(dir) != nullptr);
    std::atexit([] { std::filesystem::remove_all(dir); });  // libFuzzer ends with exit()
    auto journal = jobs::Journal::Open({.path = std::string(dir) + "/journal.sqlite3"});
    FUZZ_CHECK(journal.ok());
    w->journal = *std::move(journal);
    jobs::JobSpec spec;
    spec.owner_uid = 1000;
    spec.source_image = spec.target_image = "x";
    auto record = w->journal->Insert(spec, jobs::JobPlan{}, 1);
    FUZZ_CHECK(record.ok());
    w->known_id = record->id;
    return w;
  }();
  return *world;
}

template <typename Message>
bool Parse(const uint8_t* data, size_t size, Message& m) {
  return m.ParseFromArray(data, static_cast<int>(size));
}

void JobId(const std::string& id) {
  World& w = TheWorld();
  auto record = w.journal->Get(id);
  FUZZ_CHECK(record.ok() == (id == w.known_id));
  (void)w.journal->GetResult(id);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  World& w = TheWorld();
  const uint8_t which = data[0];
  ++data, --size;
  switch (which % 8) {
    case 0: {
      v1::SubmitJobRequest r;
      if (!Parse(data, size, r)) return 0;
      absl::Status st = ValidateJobOptions(r.options(), *w.catalogue);
      if (!st.ok()) {
        FUZZ_CHECK(st.code() == absl::StatusCode::kInvalidArgument);
        return 0;
      }
      // The job manager journals the options serialized and every later step parses them.
      v1::JobOptions again;
      FUZZ_CHECK(again.ParseFromString(r.options().SerializeAsString()));
      FUZZ_CHECK(ValidateJobOptions(again, *w.catalogue).ok());
      st = ScreenJobImages(again, r.source().inline_bytes(), r.target().inline_bytes(), 100'000'000);
      if (!st.ok()) FUZZ_CHECK(st.code() == absl::StatusCode::kInvalidArgument);
      return 0;
    }
    case 1: {
      v1::ListJobsRequest r;
      if (!Parse(data, size, r)) return 0;
      auto states = ListJobsStates(r);
      if (!states.ok()) {
        FUZZ_CHECK(states.status().code() == absl::StatusCode::kInvalidArgument);
        return 0;
      }
      auto listed = w.journal->List(1000, *states, r.limit());
      FUZZ_CHECK(listed.ok());
      FUZZ_CHECK(listed->size() <= 1);
      return 0;
    }
    case 2: {
      v1::GetJobRequest r;
      if (Parse(data, size, r)) JobId(r.job_id());
      return 0;
    }
    case 3: {
      v1::WatchJobRequest r;
      if (Parse(data, size, r)) JobId(r.job_id());
      return 0;
    }
    case 4: {
      v1::CancelJobRequest r;
      if (Parse(data, size, r)) JobId(r.job_id());
      return 0;
    }
    case 5: {
      v1::GetJobResultRequest r;
      if (Parse(data, size, r)) JobId(r.job_id());
      return 0;
    }
    case 6: {
      v1::ModelRequest r;
      if (!Parse(data, size, r)) return 0;
      auto spec = w.catalogue->Get(r.name());
      if (spec.ok()) FUZZ_CHECK((*spec)->name == r.name());
      else FUZZ_CHECK(spec.status().code() == absl::StatusCode::kNotFound);
      return 0;
    }
    case 7: {
      v1::WatchMemoryRequest r;
      if (!Parse(data, size, r)) return 0;
      FUZZ_CHECK(MemoryWatchReactor::Interval(r.interval_ms()) >= absl::Milliseconds(100));
      return 0;
    }
  }
  return 0;
}
