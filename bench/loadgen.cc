// loadgen: N client processes x M jobs with mixed options against a running fusiond, through the
// C++ SDK. Not a test: it prints figures (docs/PERFORMANCE.md).
//
//   loadgen --socket S --photos DIR [--clients 4] [--jobs 4] [--max-seconds 300] [--daemon-pid P]
//           [--mix simple,plain,enhance2,small] [--json OUT] [--timeline OUT.jsonl]
//           [--enhance-model SCALE=NAME ...]
//
// Each client is its own process (forked before any gRPC state exists, so each has its own
// channel and the daemon sees N peers); job j of client c takes photo pair (c + j) and option
// set mix[(c + j) % |mix|]:
//   simple    --simple, max_side 640          plain     defaults (max_side 1024)
//   enhance2  --enhance x2, max_side 640      small     --simple --low-vram (max_side 640), JPEG
//   enhance4  --enhance x4, max_side 640
// --enhance-model 2=NAME (4=NAME) names the catalogue enhancer of the enhance2 (enhance4) jobs
// (JobOptions.enhance_model), e.g. a synthetic TorchScript one (scripts/make_synthetic_models.py).
// Per job: latency (submit to result fetched), queue wait (started - created, daemon clock),
// state, error code, stage modes, degradations. The parent samples GetMemoryState every 200 ms
// (peak device used+reserved, peak host used, per-model device bytes into --timeline) and reads
// the daemon's VmHWM from /proc/P/status at the end (P: --daemon-pid). counters_before (the
// first sample) and counters_after (read once every client is done) are the residency counters:
// evictions, refusals, waits, uploads, bytes_uploaded, oom_recovered. Bounded: at most
// clients x jobs jobs; no job is submitted after --max-seconds, and every client stops waiting
// at --max-seconds + 60.
// Output: a JSON object (stdout, or --json OUT) and one summary line on stderr.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "fusion/client.h"

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

fusion::SwapOptions OptionsFor(const std::string& kind, const std::map<uint32_t, std::string>& enhancers) {
  fusion::SwapOptions o;
  if (kind == "simple") {
    o.simple = true;
    o.max_side = 640;
  } else if (kind == "enhance2" || kind == "enhance4") {
    o.enhance_scale = kind == "enhance2" ? 2 : 4;
    o.max_side = 640;
    if (auto it = enhancers.find(o.enhance_scale); it != enhancers.end()) o.enhance_model = it->second;
  } else if (kind == "small") {
    o.simple = true;
    o.low_vram = true;
    o.format = fusion::OutputFormat::kJpeg;
  }
  return o;
}

double MsSince(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// One job, start to fetched result: its record.
json RunJob(fusion::Client& c, const std::string& src, const std::string& tgt, const std::string& kind,
            const std::map<uint32_t, std::string>& enhancers, Clock::time_point give_up) {
  json r = {{"mix", kind}};
  const auto t0 = Clock::now();
  const fusion::SwapOptions options = OptionsFor(kind, enhancers);
  if (!options.enhance_model.empty()) r["enhance_model"] = options.enhance_model;
  auto job = c.SubmitJob(src, tgt, options);
  if (!job.ok()) {
    r["state"] = "SUBMIT_FAILED";
    r["error_code"] = static_cast<int>(job.status().code());
    r["error"] = std::string(job.status().message());
    return r;
  }
  fusion::JobInfo info = *job;
  while (!fusion::IsFinal(info.state) && Clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto g = c.GetJob(job->job_id);
    if (g.ok()) info = *g;
  }
  r["state"] = fusion::ToString(info.state);
  r["queue_wait_ms"] = info.started_unix_ms > 0 ? info.started_unix_ms - info.created_unix_ms : 0;
  if (info.state == fusion::JobState::kSucceeded) {
    auto res = c.GetJobResult(job->job_id);
    if (res.ok()) {
      json stages = json::array();
      for (const auto& s : res->stages) stages.push_back({{"name", s.name}, {"mode", s.mode}, {"ms", s.ms}});
      r["stages"] = stages;
      r["degradations"] = res->degradations;
      r["faces_swapped"] = res->faces_swapped;
    } else {
      r["state"] = "RESULT_FAILED";
      r["error"] = std::string(res.status().message());
    }
  } else {
    r["error_code"] = info.error_code;
    r["error"] = info.error_message;
  }
  r["latency_ms"] = MsSince(t0);
  return r;
}

// A client process: its jobs' records as JSON lines into `out`.
int RunClient(int client, int jobs, const std::string& socket, const std::vector<std::string>& photos,
              const std::vector<std::string>& mix, const std::map<uint32_t, std::string>& enhancers,
              Clock::time_point stop_submit, const std::string& out) {
  auto c = fusion::Client::Connect({.socket = socket, .timeout_ms = 10000});
  std::ofstream f(out);
  if (!c.ok()) {
    f << json{{"state", "CONNECT_FAILED"}, {"error", std::string(c.status().message())}}.dump() << "\n";
    return 1;
  }
  for (int j = 0; j < jobs && Clock::now() < stop_submit; ++j) {
    const size_t k = static_cast<size_t>(client + j);
    const std::string src = ReadFile(photos[k % photos.size()]);
    const std::string tgt = ReadFile(photos[(k + 1) % photos.size()]);
    json r = RunJob(**c, src, tgt, mix[k % mix.size()], enhancers, stop_submit + std::chrono::seconds(60));
    r["client"] = client;
    f << r.dump() << "\n" << std::flush;
  }
  return 0;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

uint64_t StatusKib(int pid, const std::string& key) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stoull(line.substr(key.size() + 1));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"loadgen: N client processes x M jobs against a running fusiond"};
  std::string socket, photos_dir, json_out, timeline_out, mix_s = "simple,plain,enhance2,small";
  int clients = 4, jobs = 4, daemon_pid = 0;
  double max_seconds = 300;
  app.add_option("--socket", socket, "fusiond socket")->required();
  app.add_option("--photos", photos_dir, "directory of .jpg/.png photos with faces")->required();
  app.add_option("--clients", clients, "client processes")->check(CLI::Range(1, 64));
  app.add_option("--jobs", jobs, "jobs per client")->check(CLI::Range(1, 1000));
  app.add_option("--max-seconds", max_seconds, "no job is submitted after this");
  app.add_option("--daemon-pid", daemon_pid, "fusiond's pid, for its VmHWM");
  app.add_option("--mix", mix_s, "option sets, comma-separated: simple,plain,enhance2,enhance4,small");
  app.add_option("--json", json_out, "write the JSON here instead of stdout");
  app.add_option("--timeline", timeline_out, "per-sample memory state as JSON lines");
  std::vector<std::string> enhance_models;
  app.add_option("--enhance-model", enhance_models, "SCALE=NAME: the enhancer of the enhanceSCALE jobs; repeatable");
  CLI11_PARSE(app, argc, argv);
  std::map<uint32_t, std::string> enhancers;
  for (const std::string& e : enhance_models) {
    const size_t eq = e.find('=');
    if (eq == std::string::npos || (e.substr(0, eq) != "2" && e.substr(0, eq) != "4") || eq + 1 == e.size()) {
      std::fprintf(stderr, "loadgen: --enhance-model %s is not 2=NAME or 4=NAME\n", e.c_str());
      return 2;
    }
    enhancers[static_cast<uint32_t>(std::stoul(e.substr(0, eq)))] = e.substr(eq + 1);
  }

  std::vector<std::string> photos, mix;
  for (const auto& e : std::filesystem::directory_iterator(photos_dir)) {
    const std::string ext = e.path().extension().string();
    if ((ext == ".jpg" || ext == ".png") && e.file_size() < (8u << 20)) photos.push_back(e.path().string());
  }
  std::sort(photos.begin(), photos.end());
  std::stringstream ms(mix_s);
  for (std::string m; std::getline(ms, m, ',');) mix.push_back(m);
  if (photos.size() < 2 || mix.empty()) {
    std::fprintf(stderr, "loadgen: need >= 2 photos in %s and a non-empty --mix\n", photos_dir.c_str());
    return 2;
  }
  const std::string tmp = std::filesystem::temp_directory_path() / ("loadgen." + std::to_string(getpid()));
  std::filesystem::create_directories(tmp);
  const auto t0 = Clock::now();
  const auto stop_submit = t0 + std::chrono::milliseconds(static_cast<int64_t>(max_seconds * 1000));
  std::vector<pid_t> kids;
  for (int c = 0; c < clients; ++c) {
    const pid_t pid = fork();
    if (pid == 0) {
      _exit(RunClient(c, jobs, socket, photos, mix, enhancers, stop_submit, tmp + "/client" + std::to_string(c) + ".jsonl"));
    }
    kids.push_back(pid);
  }
  // Sampler (after the fork: the children hold no gRPC state of the parent's).
  auto sampler = fusion::Client::Connect({.socket = socket});
  uint64_t peak_device = 0, peak_host = 0, samples = 0;
  json counters_before, counters_after;
  std::ofstream timeline;
  if (!timeline_out.empty()) timeline.open(timeline_out);
  std::atomic<int> running{clients};
  std::thread reaper([&] {
    for (pid_t k : kids) waitpid(k, nullptr, 0), --running;
  });
  auto counters = [](const fusion::MemoryState& m) {
    json j = {{"evictions", m.counters.evictions}, {"refusals", m.counters.refusals}, {"waits", m.counters.waits},
              {"uploads", m.counters.uploads}, {"bytes_uploaded", m.counters.bytes_uploaded}};
    for (const auto& [k, v] : m.counters.oom_recovered) j["oom_recovered"][k] = v;
    return j;
  };
  bool first = true;
  while (running > 0) {
    if (sampler.ok()) {
      auto m = (*sampler)->GetMemoryState();
      if (m.ok()) {
        if (first) counters_before = counters(*m), first = false;
        counters_after = counters(*m);
        peak_device = std::max(peak_device, m->device.used_bytes + m->device.reserved_bytes);
        peak_host = std::max(peak_host, m->host.used_bytes + m->host.reserved_bytes);
        ++samples;
        if (timeline.is_open()) {
          uint64_t oom = 0;
          for (const auto& [k, v] : m->counters.oom_recovered) oom += v;
          json models = json::object();
          for (const auto& x : m->models) models[x.name] = {{"tier", x.tier}, {"bytes", x.bytes}, {"host_bytes", x.host_bytes}};
          timeline << json{{"t_ms", MsSince(t0)}, {"device_budget", m->device.budget_bytes},
                           {"device_used", m->device.used_bytes}, {"device_reserved", m->device.reserved_bytes},
                           {"host_used", m->host.used_bytes}, {"evictions", m->counters.evictions}, {"oom_recovered", oom},
                           {"models", models}}.dump() << "\n";
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  reaper.join();
  const double wall_s = MsSince(t0) / 1000;
  if (sampler.ok()) {  // the counters once every job is done (the last sample may precede it)
    if (auto m = (*sampler)->GetMemoryState(); m.ok()) counters_after = counters(*m);
  }

  std::vector<double> lat, wait;
  std::map<std::string, int> states, failures, modes, degradations;
  json records = json::array();
  for (int c = 0; c < clients; ++c) {
    std::ifstream f(tmp + "/client" + std::to_string(c) + ".jsonl");
    for (std::string line; std::getline(f, line);) {
      json r = json::parse(line);
      const std::string st = r.value("state", "?");
      ++states[st];
      if (st == "SUCCEEDED") {
        lat.push_back(r["latency_ms"]);
        wait.push_back(r["queue_wait_ms"]);
        for (const auto& s : r["stages"]) ++modes[s["name"].get<std::string>() + ":" + s["mode"].get<std::string>()];
        for (const auto& d : r["degradations"]) ++degradations[d.get<std::string>()];
      } else {
        ++failures[st + " " + r.value("error", "")];
      }
      records.push_back(r);
    }
  }
  std::filesystem::remove_all(tmp);
  const int ok = states["SUCCEEDED"];
  json out = {{"clients", clients}, {"jobs_per_client", jobs}, {"mix", mix}, {"wall_s", wall_s},
              {"jobs_done", ok}, {"jobs_per_s", wall_s > 0 ? ok / wall_s : 0},
              {"latency_ms", {{"p50", Percentile(lat, .5)}, {"p95", Percentile(lat, .95)}, {"p99", Percentile(lat, .99)}}},
              {"queue_wait_ms", {{"p50", Percentile(wait, .5)}, {"p95", Percentile(wait, .95)}}},
              {"states", states}, {"failures", failures}, {"stage_modes", modes}, {"degradations", degradations},
              {"counters_before", counters_before}, {"counters_after", counters_after},
              {"peak_device_bytes", peak_device}, {"peak_host_bytes", peak_host}, {"memory_samples", samples},
              {"daemon_vmhwm_kib", daemon_pid ? StatusKib(daemon_pid, "VmHWM") : 0},
              {"daemon_vmrss_kib", daemon_pid ? StatusKib(daemon_pid, "VmRSS") : 0}, {"jobs", records}};
  if (json_out.empty()) {
    std::printf("%s\n", out.dump(1).c_str());
  } else {
    std::ofstream(json_out) << out.dump(1) << "\n";
  }
  std::fprintf(stderr,
               "loadgen: %d clients x %d jobs: %d ok, %zu failure kinds, %.2f jobs/s in %.1f s; latency p50 %.0f p95 %.0f "
               "p99 %.0f ms; queue wait p50 %.0f ms; peak device %.1f MiB, host %.1f MiB; daemon VmHWM %.1f MiB\n",
               clients, jobs, ok, failures.size(), wall_s > 0 ? ok / wall_s : 0, wall_s, Percentile(lat, .5),
               Percentile(lat, .95), Percentile(lat, .99), Percentile(wait, .5), peak_device / 1048576.0,
               peak_host / 1048576.0, (daemon_pid ? StatusKib(daemon_pid, "VmHWM") : 0) / 1024.0);
  return ok > 0 ? 0 : 1;
}
