// residency_trace: replays a JSON Lines trace against an eviction policy with the real
// ResidencyManager and prints one JSON object (see bench/trace_replay.h for the rules):
//   residency_trace --trace FILE --policy lru|smallest|lookahead|belady|belady-bytes
//                   --budget SIZE [--concurrency C] [--lookahead-jobs K]
#include <cstdio>
#include <fstream>
#include <sstream>

#include "CLI/CLI.hpp"
#include "bench/trace_replay.h"
#include "base/size.h"
#include "nlohmann/json.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Replays a residency trace against a policy; prints one JSON object."};
  std::string trace_path, policy = "lookahead", budget;
  int concurrency = 2, lookahead_jobs = -1;
  app.add_option("--trace", trace_path, "JSON Lines trace")->required();
  app.add_option("--policy", policy, "lru|smallest|lookahead|belady|belady-bytes");
  app.add_option("--budget", budget, "device budget, e.g. 900MiB or bytes")->required();
  app.add_option("--concurrency", concurrency, "active jobs in the rotation (default 2)");
  app.add_option("--lookahead-jobs", lookahead_jobs, "queued jobs lookahead sees (default all)");
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
  auto result = fusion::bench::Replay(
      *trace, {.policy = policy, .budget_bytes = *bytes, .concurrency = concurrency,
               .lookahead_jobs = lookahead_jobs});
  if (!result.ok()) {
    std::fprintf(stderr, "residency_trace: %s\n", result.status().ToString().c_str());
    return 1;
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
