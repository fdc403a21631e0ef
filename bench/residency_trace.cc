// residency_trace: replays a JSON Lines trace against an eviction policy with the real
// ResidencyManager and prints one JSON object (see bench/trace_replay.h for the rules):
//   residency_trace --trace FILE --policy default|planner|lru|smallest|lookahead|belady|belady-bytes|planner-offline
//                   --budget SIZE [--concurrency C] [--lookahead-jobs K] [--dump-requests FILE]
// default is what ResidencyManager::Options uses (kDefaultEvictionPolicy). --dump-requests
// writes the replayed request sequence for bench/residency_opt.py as JSON Lines: a first line
// {"budget_bytes", "pinned_bytes", "concurrency"}, then one line per turn {"turn", "model",
// "bytes", "working_bytes", "pinned", "fits", "arrived"} with, on the turns where a job arrived
// (and the first), "forecast": [[model, bytes, working_bytes, pinned], ...], the known future
// from that turn on (turn 0 = this turn) as the rotation would run it with no more arrivals.
#include <cstdio>
#include <fstream>
#include <sstream>

#include "CLI/CLI.hpp"
#include "bench/trace_replay.h"
#include "base/size.h"
#include "nlohmann/json.hpp"

namespace {

bool DumpRequests(const std::string& path, const fusion::bench::Trace& trace, uint64_t budget,
                  int concurrency, const std::vector<fusion::bench::ReplayRequest>& requests) {
  std::ofstream out(path);
  uint64_t pinned = 0;
  for (const auto& m : trace.models) pinned += m.pinned ? m.bytes : 0;
  nlohmann::ordered_json head;
  head["budget_bytes"] = budget;
  head["pinned_bytes"] = pinned;
  head["concurrency"] = concurrency;
  out << head.dump() << "\n";
  for (const auto& r : requests) {
    nlohmann::ordered_json j;
    j["turn"] = r.turn;
    j["model"] = r.model;
    j["bytes"] = r.bytes;
    j["working_bytes"] = r.working_bytes;
    j["pinned"] = r.pinned;
    j["fits"] = r.fits;
    j["arrived"] = r.arrived;
    if (!r.forecast.requests.empty()) {
      j["forecast"] = nlohmann::json::array();
      for (const auto& f : r.forecast.requests) {
        j["forecast"].push_back({f.model, f.bytes, f.working_bytes, f.pinned});
      }
    }
    out << j.dump() << "\n";
  }
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Replays a residency trace against a policy; prints one JSON object."};
  std::string trace_path, policy = "default", budget, dump_path;
  int concurrency = 2, lookahead_jobs = -1;
  app.add_option("--trace", trace_path, "JSON Lines trace")->required();
  app.add_option("--policy", policy,
                 "default|planner|lru|smallest|lookahead|belady|belady-bytes|planner-offline "
                 "(default: default)");
  app.add_option("--budget", budget, "device budget, e.g. 900MiB or bytes")->required();
  app.add_option("--concurrency", concurrency, "active jobs in the rotation (default 2)");
  app.add_option("--lookahead-jobs", lookahead_jobs, "queued jobs lookahead sees (default all)");
  app.add_option("--dump-requests", dump_path, "write the replayed requests (JSON Lines)");
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(trace_path);
  if (!in) {
    std::fprintf(stderr, "residency_trace: cannot read %s\n", trace_path.c_str());
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto trace = fusion::bench::ParseTrace(text.str());
  auto bytes = fusion::ParseSize(budget);
  if (!trace.ok() || !bytes.ok()) {
    std::fprintf(stderr, "residency_trace: %s\n",
                 (!trace.ok() ? trace.status() : bytes.status()).ToString().c_str());
    return 2;
  }
  std::vector<fusion::bench::ReplayRequest> requests;
  auto result = fusion::bench::Replay(
      *trace, {.policy = policy, .budget_bytes = *bytes, .concurrency = concurrency,
               .lookahead_jobs = lookahead_jobs,
               .requests = dump_path.empty() ? nullptr : &requests});
  if (!result.ok()) {
    std::fprintf(stderr, "residency_trace: %s\n", result.status().ToString().c_str());
    return 1;
  }
  if (!dump_path.empty() && !DumpRequests(dump_path, *trace, *bytes, concurrency, requests)) {
    std::fprintf(stderr, "residency_trace: cannot write %s\n", dump_path.c_str());
    return 2;
  }
  nlohmann::ordered_json j;
  j["policy"] = policy;
  j["budget_bytes"] = *bytes;
  j["bytes_uploaded"] = result->bytes_uploaded;
  j["loads"] = result->loads;
  j["evictions"] = result->evictions;
  j["peak_bytes"] = result->peak_bytes;
  j["refused"] = result->refused;
  std::printf("%s\n", j.dump().c_str());
  return 0;
}
