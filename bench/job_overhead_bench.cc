// job_overhead_bench: the latency a job adds over its pipeline time, split into image transport
// and journal write, for the 11-megapixel mosaic (goal: transport < 5 ms). Not a test.
//
//   transport in   SDK PutMemfd (sealed memfd over <socket>.fd, SCM_RIGHTS) + the daemon's
//                  MemfdRegistry::Get + the copy SubmitJob makes of the mapped bytes
//   transport out  MemfdRegistry::Publish of the result + SDK GetMemfd (map and copy)
//   inline (ref.)  the protobuf serialize + parse an inline image costs, without the socket
//   journal insert Journal::Insert of the job with its source and target bytes (SQLite commit)
//   journal finish Journal::Finish with the result image (SQLite commit)
//
// Each figure is the median and the max of --iterations runs, ms.
//   job_overhead_bench --target build/fetched/testdata/faces/mosaic_3840x2896.jpg \
//                      --source tests/data/faces/astronaut_eileen_collins_512.png
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "fusion/v1/fusion.pb.h"
#include "jobs/journal.h"
#include "memfd_transfer.h"
#include "rpc/fd_exchange.h"
#include "rpc/memfd_registry.h"
#include "bench/read_file.h"

namespace {

using fusion::bench::ReadFile;

// Runs `step` n times; prints the median and max wall time in ms. `step` returns false on error.
bool Measure(const char* name, uint64_t bytes, int n, const std::function<bool()>& step) {
  std::vector<double> ms;
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!step()) return false;
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("%-16s %12llu bytes  median %8.3f ms  max %8.3f ms\n", name,
              static_cast<unsigned long long>(bytes), ms[ms.size() / 2], ms.back());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"job_overhead_bench: transport and journal cost of one job"};
  std::string target_path, source_path;
  int n = 20;
  uint64_t result_bytes = 0;
  app.add_option("--target", target_path, "target image (the mosaic)")->required();
  app.add_option("--source", source_path, "source image")->required();
  app.add_option("--iterations", n, "runs per figure")->check(CLI::Range(1, 10000));
  app.add_option("--result-bytes", result_bytes,
                 "result image size in bytes (default: 5 x the target, about an 11-megapixel PNG)");
  CLI11_PARSE(app, argc, argv);
  const std::string target = ReadFile(target_path), source = ReadFile(source_path);
  if (target.empty() || source.empty()) {
    std::fprintf(stderr, "cannot read --target or --source\n");
    return 2;
  }
  if (result_bytes == 0) result_bytes = 5 * target.size();
  std::string result(result_bytes, '\0');
  for (size_t i = 0; i < result.size(); ++i) result[i] = static_cast<char>((i * 2654435761u) >> 13);

  char tmpl[] = "/tmp/fusion-bench-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 2;
  const std::string dir = tmpl, socket = dir + "/f.sock";
  fusion::MemfdRegistry registry({});
  auto exchange = fusion::FdExchange::Create(socket, "", {}, &registry);
  if (!exchange.ok()) {
    std::fprintf(stderr, "fd exchange: %s\n", exchange.status().ToString().c_str());
    return 1;
  }
  const uid_t uid = geteuid();
  bool ok = Measure("transport in", target.size(), n, [&] {
    auto token = fusion::internal::PutMemfd(socket, target);
    if (!token.ok()) return false;
    auto mapped = registry.Get(*token, uid);
    if (!mapped.ok()) return false;
    const std::string copy((*mapped)->bytes());
    registry.Remove(*token);
    return copy.size() == target.size();
  });
  ok = ok && Measure("transport out", result.size(), n, [&] {
    auto token = registry.Publish(result, uid);
    if (!token.ok()) return false;
    auto bytes = fusion::internal::GetMemfd(socket, *token);
    registry.Remove(*token);
    return bytes.ok() && bytes->size() == result.size();
  });
  ok = ok && Measure("inline (ref.)", target.size(), n, [&] {
    fusion::v1::ImageData image, parsed;
    image.set_inline_bytes(target);
    const std::string wire = image.SerializeAsString();
    return parsed.ParseFromString(wire) && parsed.inline_bytes().size() == target.size();
  });

  auto journal = fusion::jobs::Journal::Open({.path = dir + "/journal.sqlite3"});
  if (!journal.ok()) {
    std::fprintf(stderr, "journal: %s\n", journal.status().ToString().c_str());
    return 1;
  }
  fusion::jobs::JobSpec spec{.owner_uid = uid, .source_image = source, .target_image = target};
  const fusion::jobs::JobPlan plan{.target = fusion::v1::IMAGE, .stage_models = {"face_detection", "face_swap"}};
  std::vector<std::string> ids;
  ok = ok && Measure("journal insert", source.size() + target.size(), n, [&] {
    auto record = (*journal)->Insert(spec, plan, 1);
    if (!record.ok()) return false;
    ids.push_back(record->id);
    return true;
  });
  size_t next = 0;
  fusion::jobs::StoredResult stored;
  stored.image = result;
  ok = ok && Measure("journal finish", result.size(), n, [&] {
    return (*journal)->Finish(ids[next++], fusion::jobs::JobState::SUCCEEDED, 0, "", stored, 2).ok();
  });
  journal->reset();
  (*exchange)->Stop();
  std::filesystem::remove_all(dir);
  return ok ? 0 : 1;
}
