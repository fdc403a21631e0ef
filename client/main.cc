// fusionctl: command-line client of fusiond (through the SDK only; `live` decodes its input file with
// fusion_video).
#include <cstdio>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "format.h"
#include "live.h"
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

// The command line: the options' values and the subcommands, as parsed.
struct CommandLine {
  std::string socket;
  int64_t timeout_ms = 2000;
  std::string memfd_threshold;
  bool debug = false;
  bool json = false;
  bool watch = false;
  uint32_t interval_ms = 1000, count = 0;
  fusion::ctl::SwapArgs swap_args;
  fusion::ctl::LiveArgs live_args;
  bool all_uids = false;
  std::string job_id;
  std::string result_out;
  std::string help_topic;
  std::string model_name;
  CLI::App *health = nullptr, *mem = nullptr, *swap = nullptr, *jobs = nullptr, *job = nullptr, *cancel = nullptr,
           *result = nullptr, *help = nullptr, *models = nullptr,
           *live = nullptr;
  std::vector<std::pair<CLI::App*, const char*>> model_ops;  // load, unload, pin, unpin
};

// The options every subcommand takes.
void AddGlobalOptions(CLI::App& app, CommandLine& cl) {
  app.footer(kExitCodes);
  app.require_subcommand(1);
  app.set_version_flag("--version", "fusionctl " FUSION_VERSION);
  app.add_option("--socket", cl.socket, "fusiond socket (default $FUSIOND_SOCKET or /run/fusiond/fusiond.sock)");
  app.add_option("--memfd-threshold", cl.memfd_threshold,
                 "images larger than this go by memfd over <socket>.fd (default 4MiB; e.g. 1MiB)");
  app.add_flag("--debug", cl.debug, "print the SDK's debug notes on stderr (e.g. an image sent inline because <socket>.fd refused it)");
  app.add_option("--timeout-ms", cl.timeout_ms, "deadline of each call in ms (1..86400000)")
      ->check(CLI::Range(int64_t{1}, int64_t{86400000}).description(""));
}

// The subcommands and their options, in the order help lists them.
void AddSubcommands(CLI::App& app, CommandLine& cl) {
  cl.health = app.add_subcommand("health", "check that fusiond serves (exit 0 if SERVING)");
  cl.mem = app.add_subcommand("mem", "show device and host memory, models and clients");
  cl.mem->add_flag("--json", cl.json, "print JSON (byte counts are numbers)");
  cl.mem->add_flag("--watch", cl.watch, "print the state again every --interval-ms until interrupted (JSON: one per line)");
  cl.mem->add_option("--interval-ms", cl.interval_ms, "--watch period in ms (at least 100)")
      ->check(CLI::Range(uint32_t{100}, uint32_t{86400000}));
  cl.mem->add_option("--count", cl.count, "--watch: stop after this many states (0 = never)");
  cl.swap = app.add_subcommand("swap", "fuse the source face into the target's faces");
  fusion::ctl::AddSwapOptions(cl.swap, cl.swap_args);
#ifdef FUSIONCTL_LIVE
  cl.live = app.add_subcommand("live", "a live session: send a video file's frames paced, write the swapped ones");
  fusion::ctl::AddLiveOptions(cl.live, cl.live_args);
#endif
  cl.jobs = app.add_subcommand("jobs", "list your jobs");
  cl.jobs->add_flag("--json", cl.json, "print JSON");
  cl.jobs->add_flag("--all", cl.all_uids, "every uid's jobs, with their owner (admins: root, fusiond's uid, admin_uids, admin_group)");
  cl.job = app.add_subcommand("job", "show one job");
  cl.job->add_option("ID", cl.job_id)->required();
  cl.job->add_flag("--json", cl.json, "print JSON");
  cl.cancel = app.add_subcommand("cancel", "cancel a queued or running job (admins: any uid's)");
  cl.cancel->add_option("ID", cl.job_id)->required();
  cl.cancel->add_flag("--json", cl.json, "print JSON");
  cl.result = app.add_subcommand("result", "write a finished job's image to OUT");
  cl.result->add_option("ID", cl.job_id)->required();
  cl.result->add_option("-o", cl.result_out, "output image file")->required();
  cl.result->add_flag("--json", cl.json, "print the job result as JSON");

  cl.help = app.add_subcommand("help", "print this help, or a subcommand's (help SUBCOMMAND)");
  cl.help->add_option("SUBCOMMAND", cl.help_topic);
  cl.models = app.add_subcommand("models", "list the catalogue's models and their residency");
  cl.models->add_flag("--json", cl.json, "print JSON");
  for (const char* op : {"load", "unload", "pin", "unpin"}) {
    CLI::App* c = app.add_subcommand(op, std::string(op) + " a model (catalogue name)");
    c->add_option("NAME", cl.model_name)->required();
    c->add_flag("--json", cl.json, "print JSON");
    cl.model_ops.emplace_back(c, op);
  }
}

// `help [SUBCOMMAND]`: the formatter directly (app.help() would print the parsed subcommand's,
// help's, help).
int PrintHelp(const CLI::App& app, const std::string& topic) {
  const auto formatter = app.get_formatter();
  if (topic.empty()) {
    std::cout << formatter->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal);
    return kExitOk;
  }
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == topic) {
      std::cout << formatter->make_help(sub, app.get_name() + " " + sub->get_name(), CLI::AppFormatMode::Normal);
      return kExitOk;
    }
  }
  std::fprintf(stderr, "fusionctl: help: no subcommand '%s' (fusionctl help lists them)\n", topic.c_str());
  return kExitUnreachableOrUsage;
}

// The client options from the command line; false (after a message on stderr) for a bad
// --memfd-threshold.
bool ClientOptionsOf(const CommandLine& cl, fusion::ClientOptions& client_options) {
  client_options = fusion::ClientOptions{.socket = cl.socket, .timeout_ms = cl.timeout_ms};
  if (cl.debug) {
    client_options.debug_log = [](const std::string& note) { std::fprintf(stderr, "fusionctl: debug: %s\n", note.c_str()); };
  }
  if (!cl.memfd_threshold.empty()) {
    auto bytes = fusion::ParseSize(cl.memfd_threshold);
    if (!bytes.ok()) {
      std::fprintf(stderr, "fusionctl: --memfd-threshold: %s\n", std::string(bytes.status().message()).c_str());
      return false;
    }
    client_options.memfd_threshold_bytes = *bytes;
  }
  return true;
}

int RunHealth(fusion::Client& client) {
  auto status = client.Health();
  if (!status.ok()) return fusion::ctl::Fail(status.status());
  std::printf("%s %s\n", client.target().c_str(), fusion::ToString(*status));
  return *status == fusion::ServingStatus::kServing ? kExitOk : kExitFailure;
}

int RunModels(fusion::Client& client, bool json) {
  auto list = client.ListModels();
  if (!list.ok()) return fusion::ctl::Fail(list.status());
  nlohmann::json out = nlohmann::json::array();
  for (const fusion::ModelStatus& m : *list) {
    if (json) out.push_back(fusion::ctl::ModelToJson(m));
    else std::cout << fusion::ctl::ModelToText(m) << "\n";
  }
  if (json) std::cout << out.dump(2) << "\n";
  return kExitOk;
}

// load, unload, pin or unpin the model `name`.
int RunModelOp(fusion::Client& client, const std::string& o, const std::string& name, bool json) {
  auto m = o == "load"     ? client.LoadModel(name)
           : o == "unload" ? client.UnloadModel(name)
           : o == "pin"    ? client.PinModel(name)
                           : client.UnpinModel(name);
  if (!m.ok()) return fusion::ctl::Fail(m.status());
  if (json) std::cout << fusion::ctl::ModelToJson(*m).dump(2) << "\n";
  else std::cout << fusion::ctl::ModelToText(*m) << "\n";
  return kExitOk;
}

int RunMem(fusion::Client& client, const CommandLine& cl) {
  const bool json = cl.json;
  if (cl.watch) {
    uint32_t seen = 0;
    absl::Status watched = client.WatchMemory(cl.interval_ms, [&](const fusion::MemoryState& state) {
      if (json) std::cout << fusion::ctl::MemoryStateToJson(state).dump() << std::endl;
      else std::cout << fusion::ctl::MemoryStateToText(state) << std::endl;
      return cl.count == 0 || ++seen < cl.count;
    });
    return watched.ok() ? kExitOk : fusion::ctl::Fail(watched);
  }
  auto state = client.GetMemoryState();
  if (!state.ok()) return fusion::ctl::Fail(state.status());
  if (json) {
    std::cout << fusion::ctl::MemoryStateToJson(*state).dump(2) << "\n";
  } else {
    std::cout << fusion::ctl::MemoryStateToText(*state);
  }
  return kExitOk;
}

// The parsed subcommand, run; its exit code.
int RunSubcommand(fusion::Client& client, const CommandLine& cl) {
  if (cl.health->parsed()) return RunHealth(client);
  if (cl.swap->parsed()) return fusion::ctl::RunSwap(client, cl.swap_args);
#ifdef FUSIONCTL_LIVE
  if (cl.live->parsed()) return fusion::ctl::RunLive(client, cl.live_args);
#endif
  if (cl.jobs->parsed()) return fusion::ctl::RunJobs(client, cl.json, cl.all_uids);
  if (cl.job->parsed()) return fusion::ctl::RunJob(client, cl.job_id, cl.json);
  if (cl.cancel->parsed()) return fusion::ctl::RunCancel(client, cl.job_id, cl.json);
  if (cl.result->parsed()) return fusion::ctl::RunResult(client, cl.job_id, cl.result_out, cl.json);
  if (cl.models->parsed()) return RunModels(client, cl.json);
  for (auto [cmd, op] : cl.model_ops) {
    if (cmd->parsed()) return RunModelOp(client, op, cl.model_name, cl.json);
  }
  if (cl.mem->parsed()) return RunMem(client, cl);
  return kExitUnreachableOrUsage;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"fusionctl: talk to fusiond, the face-fusion daemon."};
  CommandLine cl;
  AddGlobalOptions(app, cl);
  AddSubcommands(app, cl);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? kExitOk : kExitUnreachableOrUsage;
  }
  if (cl.help->parsed()) return PrintHelp(app, cl.help_topic);
  fusion::ClientOptions client_options;
  if (!ClientOptionsOf(cl, client_options)) return kExitUnreachableOrUsage;
  auto client = fusion::Client::Connect(client_options);
  if (!client.ok()) {  // a bad --socket or option: a usage error
    std::fprintf(stderr, "fusionctl: %s\n", std::string(client.status().message()).c_str());
    return kExitUnreachableOrUsage;
  }
  return RunSubcommand(**client, cl);
}
