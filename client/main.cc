// fusionctl: command-line client of fusiond (through the SDK only).
#include <cstdio>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "format.h"
#include "swap.h"
#include "fusion/client.h"
#include "base/size.h"

namespace {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUnreachableOrUsage = 2;

constexpr char kExitCodes[] =
    "Exit codes:\n"
    "  0  success\n"
    "  2  fusiond unreachable, or a usage error\n"
    "  1  any other failure (the gRPC status name and message are printed on stderr)\n"
    "Environment: FUSIOND_SOCKET sets the socket when --socket is not given.";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fusionctl: talk to fusiond, the face-fusion daemon."};
  app.footer(kExitCodes);
  app.require_subcommand(1);
  app.set_version_flag("--version", "fusionctl " FUSION_VERSION);
  std::string socket;
  int64_t timeout_ms = 2000;
  app.add_option("--socket", socket, "fusiond socket (default $FUSIOND_SOCKET or /run/fusiond/fusiond.sock)");
  std::string memfd_threshold;
  app.add_option("--memfd-threshold", memfd_threshold,
                 "images larger than this go by memfd over <socket>.fd (default 4MiB; e.g. 1MiB)");
  bool debug = false;
  app.add_flag("--debug", debug, "print the SDK's debug notes on stderr (e.g. an image sent inline because <socket>.fd refused it)");
  app.add_option("--timeout-ms", timeout_ms, "deadline of each call in ms (1..86400000)")
      ->check(CLI::Range(int64_t{1}, int64_t{86400000}).description(""));

  CLI::App* health = app.add_subcommand("health", "check that fusiond serves (exit 0 if SERVING)");
  CLI::App* mem = app.add_subcommand("mem", "show device and host memory, models and clients");
  bool json = false;
  mem->add_flag("--json", json, "print JSON (byte counts are numbers)");
  bool watch = false;
  uint32_t interval_ms = 1000, count = 0;
  mem->add_flag("--watch", watch, "print the state again every --interval-ms until interrupted (JSON: one per line)");
  mem->add_option("--interval-ms", interval_ms, "--watch period in ms (at least 100)")
      ->check(CLI::Range(uint32_t{100}, uint32_t{86400000}));
  mem->add_option("--count", count, "--watch: stop after this many states (0 = never)");
  fusion::ctl::SwapArgs swap_args;
  CLI::App* swap = app.add_subcommand("swap", "fuse the source face into the target's faces");
  fusion::ctl::AddSwapOptions(swap, swap_args);
  CLI::App* jobs = app.add_subcommand("jobs", "list your jobs");
  jobs->add_flag("--json", json, "print JSON");
  bool all_uids = false;
  jobs->add_flag("--all", all_uids, "every uid's jobs, with their owner (admins: root, fusiond's uid, admin_uids, admin_group)");
  std::string job_id;
  CLI::App* job = app.add_subcommand("job", "show one job");
  job->add_option("ID", job_id)->required();
  job->add_flag("--json", json, "print JSON");
  CLI::App* cancel = app.add_subcommand("cancel", "cancel a queued or running job (admins: any uid's)");
  cancel->add_option("ID", job_id)->required();
  cancel->add_flag("--json", json, "print JSON");
  std::string result_out;
  CLI::App* result = app.add_subcommand("result", "write a finished job's image to OUT");
  result->add_option("ID", job_id)->required();
  result->add_option("-o", result_out, "output image file")->required();
  result->add_flag("--json", json, "print the job result as JSON");

  std::string help_topic;
  CLI::App* help = app.add_subcommand("help", "print this help, or a subcommand's (help SUBCOMMAND)");
  help->add_option("SUBCOMMAND", help_topic);
  CLI::App* models = app.add_subcommand("models", "list the catalogue's models and their residency");
  models->add_flag("--json", json, "print JSON");
  std::string model_name;
  std::vector<std::pair<CLI::App*, const char*>> model_ops;
  for (const char* op : {"load", "unload", "pin", "unpin"}) {
    CLI::App* c = app.add_subcommand(op, std::string(op) + " a model (catalogue name)");
    c->add_option("NAME", model_name)->required();
    c->add_flag("--json", json, "print JSON");
    model_ops.emplace_back(c, op);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUnreachableOrUsage;
  }

  if (help->parsed()) {
    // The formatter directly: app.help() would print the parsed subcommand's (help's) help.
    const auto formatter = app.get_formatter();
    if (help_topic.empty()) {
      std::cout << formatter->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal);
      return kExitOk;
    }
    for (const CLI::App* sub : app.get_subcommands({})) {
      if (sub->get_name() == help_topic) {
        std::cout << formatter->make_help(sub, app.get_name() + " " + sub->get_name(), CLI::AppFormatMode::Normal);
        return kExitOk;
      }
    }
    std::fprintf(stderr, "fusionctl: help: no subcommand '%s' (fusionctl help lists them)\n", help_topic.c_str());
    return kExitUnreachableOrUsage;
  }
  fusion::ClientOptions client_options{.socket = socket, .timeout_ms = timeout_ms};
  if (debug) {
    client_options.debug_log = [](const std::string& note) { std::fprintf(stderr, "fusionctl: debug: %s\n", note.c_str()); };
  }
  if (!memfd_threshold.empty()) {
    auto bytes = fusion::ParseSize(memfd_threshold);
    if (!bytes.ok()) {
      std::fprintf(stderr, "fusionctl: --memfd-threshold: %s\n", std::string(bytes.status().message()).c_str());
      return kExitUnreachableOrUsage;
    }
    client_options.memfd_threshold_bytes = *bytes;
  }
  auto client = fusion::Client::Connect(client_options);
  if (!client.ok()) {  // a bad --socket or option: a usage error
    std::fprintf(stderr, "fusionctl: %s\n", std::string(client.status().message()).c_str());
    return 2;
  }

  if (health->parsed()) {
    auto status = (*client)->Health();
    if (!status.ok()) return fusion::ctl::Fail(status.status());
    std::printf("%s %s\n", (*client)->target().c_str(), fusion::ToString(*status));
    return *status == fusion::ServingStatus::kServing ? kExitOk : kExitFailure;
  }
  if (swap->parsed()) return fusion::ctl::RunSwap(**client, swap_args);
  if (jobs->parsed()) return fusion::ctl::RunJobs(**client, json, all_uids);
  if (job->parsed()) return fusion::ctl::RunJob(**client, job_id, json);
  if (cancel->parsed()) return fusion::ctl::RunCancel(**client, job_id, json);
  if (result->parsed()) return fusion::ctl::RunResult(**client, job_id, result_out, json);
  if (models->parsed()) {
    auto list = (*client)->ListModels();
    if (!list.ok()) return fusion::ctl::Fail(list.status());
    nlohmann::json out = nlohmann::json::array();
    for (const fusion::ModelStatus& m : *list) {
      if (json) out.push_back(fusion::ctl::ModelToJson(m));
      else std::cout << fusion::ctl::ModelToText(m) << "\n";
    }
    if (json) std::cout << out.dump(2) << "\n";
    return kExitOk;
  }
  for (auto [cmd, op] : model_ops) {
    if (!cmd->parsed()) continue;
    const std::string o = op;
    auto m = o == "load"     ? (*client)->LoadModel(model_name)
             : o == "unload" ? (*client)->UnloadModel(model_name)
             : o == "pin"    ? (*client)->PinModel(model_name)
                             : (*client)->UnpinModel(model_name);
    if (!m.ok()) return fusion::ctl::Fail(m.status());
    if (json) std::cout << fusion::ctl::ModelToJson(*m).dump(2) << "\n";
    else std::cout << fusion::ctl::ModelToText(*m) << "\n";
    return kExitOk;
  }
  if (mem->parsed() && watch) {
    uint32_t seen = 0;
    absl::Status watched = (*client)->WatchMemory(interval_ms, [&](const fusion::MemoryState& state) {
      if (json) std::cout << fusion::ctl::MemoryStateToJson(state).dump() << std::endl;
      else std::cout << fusion::ctl::MemoryStateToText(state) << std::endl;
      return count == 0 || ++seen < count;
    });
    return watched.ok() ? kExitOk : fusion::ctl::Fail(watched);
  }
  if (mem->parsed()) {
    auto state = (*client)->GetMemoryState();
    if (!state.ok()) return fusion::ctl::Fail(state.status());
    if (json) {
      std::cout << fusion::ctl::MemoryStateToJson(*state).dump(2) << "\n";
    } else {
      std::cout << fusion::ctl::MemoryStateToText(*state);
    }
    return kExitOk;
  }
  return kExitUnreachableOrUsage;
}
