// The readers, flags and documents of config.h, each a loop over the key table
// (config_table.h); ParseListenAddress and ValidateConfig check what one key alone cannot.
#include "config/config.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <type_traits>
#include <variant>

#include <CLI/CLI.hpp>
#include <toml++/toml.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/time/time.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "base/size.h"
#include "config/config_table.h"
#include "memory/eviction_policy.h"
#include "base/status_macros.h"

namespace fusion {
namespace {

using config_table::ConfigKey;
using config_table::KeyType;
using config_table::Unit;

// ---- Words the table's entries are shown and explained with ----

absl::string_view UnitName(Unit unit) {
  switch (unit) {
    case Unit::kNone: return "";
    case Unit::kBytes: return "bytes";
    case Unit::kMs: return "ms";
    case Unit::kPx: return "px";
    case Unit::kFrames: return "frames";
    case Unit::kFraction: return "fraction";
  }
  return "";
}

absl::string_view TypeName(KeyType type) {
  switch (type) {
    case KeyType::kString: return "string";
    case KeyType::kStrings: return "strings";
    case KeyType::kUids: return "uids";
    case KeyType::kBytes: return "size";
    case KeyType::kInteger: return "integer";
    case KeyType::kNumber: return "number";
    case KeyType::kDuration: return "duration";
  }
  return "";
}

std::string Bound(const ConfigKey& k, double v) {
  return k.type == KeyType::kInteger ? absl::StrCat(static_cast<int64_t>(v)) : absl::StrCat(v);
}

// "[1, 64]", "(0, 1]": the bounds a TOML value must be within (kInteger, kNumber). A flag's
// range (`for_flag`) leaves out 0, which on the command line means "not given".
std::string RangeText(const ConfigKey& k, bool for_flag = false) {
  const bool lo_open = k.range.lo_open || (for_flag && k.range.lo == 0 && k.type != KeyType::kInteger);
  return absl::StrCat(lo_open ? "(" : "[", Bound(k, k.range.lo), ", ", Bound(k, k.range.hi),
                      k.range.hi_open ? ")" : "]");
}

bool InRange(const ConfigKey& k, double v, bool zero_allowed) {
  const auto& r = k.range;
  if (!zero_allowed && v == 0) return false;
  return (r.lo_open ? v > r.lo : v >= r.lo) && (r.hi_open ? v < r.hi : v <= r.hi);
}

// `0 = never`, `"" = the process's group`, `[] = anyone ...`; "" when 0 means nothing special.
std::string ZeroText(const ConfigKey& k) {
  if (k.zero_means.empty()) return "";
  absl::string_view zero = "0";
  if (k.type == KeyType::kString || k.type == KeyType::kDuration) zero = k.type == KeyType::kString ? "\"\"" : "\"0\"";
  if (k.type == KeyType::kStrings || k.type == KeyType::kUids) zero = "[]";
  return absl::StrCat(zero, " = ", k.zero_means);
}

// "(ms; 0 = never)" after a TOML range error; "" when there is nothing to add.
std::string ErrorNote(const ConfigKey& k) {
  std::vector<std::string> parts;
  if (!UnitName(k.unit).empty()) parts.emplace_back(UnitName(k.unit));
  if (!k.zero_means.empty()) parts.push_back(ZeroText(k));
  return parts.empty() ? "" : absl::StrCat(" (", absl::StrJoin(parts, "; "), ")");
}

// 536870912 -> "512MiB"; sizes that are not whole KiB, MiB or GiB stay in bytes.
std::string SizeText(uint64_t bytes) {
  for (const auto& [shift, unit] : {std::pair{30, "GiB"}, std::pair{20, "MiB"}, std::pair{10, "KiB"}}) {
    const uint64_t scale = uint64_t{1} << shift;
    if (bytes != 0 && bytes % scale == 0) return absl::StrCat(bytes / scale, unit);
  }
  return absl::StrCat(bytes);
}

// The default (DaemonConfig{}'s value) as a TOML value: "cpu", "512MiB", 0, [], "24h", 0.85.
std::string DefaultToml(const ConfigKey& k) {
  static const DaemonConfig kDefaults;
  return std::visit(
      [&](auto member) -> std::string {
        const auto& v = kDefaults.*member;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return absl::StrCat("\"", v, "\"");
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          return v.empty() ? "[]" : absl::StrCat("[\"", absl::StrJoin(v, "\", \""), "\"]");
        } else if constexpr (std::is_same_v<T, std::vector<uid_t>>) {
          return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
        } else if constexpr (std::is_same_v<T, int64_t>) {
          if (v == kDurationForever) return "\"forever\"";
          return absl::StrCat("\"", absl::FormatDuration(absl::Milliseconds(v)), "\"");
        } else if constexpr (std::is_same_v<T, uint64_t>) {
          return k.type == KeyType::kBytes && v != 0 ? absl::StrCat("\"", SizeText(v), "\"") : absl::StrCat(v);
        } else {
          return absl::StrCat(v);
        }
      },
      k.member);
}

const ConfigKey* FindKey(absl::string_view name) {
  for (const ConfigKey& k : config_table::Keys()) {
    if (k.key == name) return &k;
  }
  return nullptr;
}

// ---- TOML values ----

absl::Status KeyError(const std::string& origin, absl::string_view key, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(origin, ": key '", key, "': ", why));
}

absl::Status ReadString(const toml::node& node, const std::string& origin, absl::string_view key,
                        std::string& out) {
  auto v = node.value<std::string>();
  if (!v) return KeyError(origin, key, "must be a string");
  out = *v;
  return absl::OkStatus();
}

absl::Status ReadSize(const toml::node& node, const std::string& origin, absl::string_view key,
                      uint64_t& out) {
  if (node.is_boolean()) return KeyError(origin, key, "must be a size string like \"512MiB\" or an integer");
  if (auto i = node.value_exact<int64_t>()) {
    if (*i < 0) return KeyError(origin, key, "a size cannot be negative");
    out = static_cast<uint64_t>(*i);
    return absl::OkStatus();
  }
  auto s = node.value<std::string>();
  if (!s) return KeyError(origin, key, "must be a size string like \"512MiB\" or an integer");
  auto parsed = ParseSize(*s);
  if (!parsed.ok()) return KeyError(origin, key, std::string(parsed.status().message()));
  out = *parsed;
  return absl::OkStatus();
}

absl::Status ReadUids(const toml::node& node, const std::string& origin, absl::string_view key,
                      std::vector<uid_t>& out) {
  const toml::array* arr = node.as_array();
  if (arr == nullptr) return KeyError(origin, key, "must be an array of uids");
  out.clear();
  for (const toml::node& e : *arr) {
    auto i = e.value_exact<int64_t>();
    if (!i || *i < 0 || *i >= 4294967295) {
      return KeyError(origin, key, "every uid must be an integer in [0, 4294967294]");
    }
    out.push_back(static_cast<uid_t>(*i));
  }
  return absl::OkStatus();
}

absl::Status ReadStrings(const toml::node& node, const std::string& origin, absl::string_view key,
                         std::vector<std::string>& out) {
  const toml::array* arr = node.as_array();
  if (arr == nullptr) return KeyError(origin, key, "must be an array of strings");
  out.clear();
  for (const toml::node& e : *arr) {
    auto v = e.value<std::string>();
    if (!v) return KeyError(origin, key, "every entry must be a string");
    out.push_back(*v);
  }
  return absl::OkStatus();
}

// Stores an integer already checked against the key's range into its uint32_t or uint64_t member.
void StoreInteger(const ConfigKey& k, uint64_t value, DaemonConfig& config) {
  if (auto m = std::get_if<uint32_t DaemonConfig::*>(&k.member)) config.**m = static_cast<uint32_t>(value);
  if (auto m = std::get_if<uint64_t DaemonConfig::*>(&k.member)) config.**m = value;
}

absl::Status ReadInteger(const toml::node& node, const std::string& origin, const ConfigKey& k,
                         DaemonConfig& config) {
  auto i = node.value_exact<int64_t>();
  if (!i || !InRange(k, static_cast<double>(*i), true)) {
    return KeyError(origin, k.key, absl::StrCat("must be an integer in ", RangeText(k), ErrorNote(k)));
  }
  StoreInteger(k, static_cast<uint64_t>(*i), config);
  return absl::OkStatus();
}

absl::Status ReadNumber(const toml::node& node, const std::string& origin, const ConfigKey& k,
                        double& out) {
  auto d = node.value<double>();
  if (!d || !InRange(k, *d, true)) {
    return KeyError(origin, k.key, absl::StrCat("must be a number in ", RangeText(k), ErrorNote(k)));
  }
  out = *d;
  return absl::OkStatus();
}

// An absl duration ("24h", "90m", "500ms", "0") in milliseconds, or "forever" where the key
// allows it; false for anything else, a negative duration or one finer than a millisecond (it
// was once truncated to whole seconds: "500ms" meant 0, "at once").
bool ParseDurationText(const ConfigKey& k, const std::string& text, int64_t& ms) {
  if (k.forever && text == "forever") {
    ms = kDurationForever;
    return true;
  }
  absl::Duration d;
  if (!absl::ParseDuration(text, &d) || d < absl::ZeroDuration() || d == absl::InfiniteDuration()) return false;
  if (d != absl::Milliseconds(absl::ToInt64Milliseconds(d))) return false;
  ms = absl::ToInt64Milliseconds(d);
  return true;
}

std::string DurationExpected(const ConfigKey& k) {
  return absl::StrCat("must be a duration string like \"24h\", \"90m\" or \"500ms\" (whole milliseconds)",
                      k.forever ? ", or \"forever\"" : "");
}

absl::Status ReadDuration(const toml::node& node, const std::string& origin, const ConfigKey& k,
                          int64_t& ms) {
  auto text = node.value<std::string>();
  if (!text || !ParseDurationText(k, *text, ms)) return KeyError(origin, k.key, DurationExpected(k));
  return absl::OkStatus();
}

absl::Status ReadKey(const ConfigKey& k, const toml::node& node, const std::string& origin,
                     DaemonConfig& config) {
  using C = DaemonConfig;
  switch (k.type) {
    case KeyType::kString: return ReadString(node, origin, k.key, config.*std::get<std::string C::*>(k.member));
    case KeyType::kStrings:
      return ReadStrings(node, origin, k.key, config.*std::get<std::vector<std::string> C::*>(k.member));
    case KeyType::kUids: return ReadUids(node, origin, k.key, config.*std::get<std::vector<uid_t> C::*>(k.member));
    case KeyType::kBytes: return ReadSize(node, origin, k.key, config.*std::get<uint64_t C::*>(k.member));
    case KeyType::kInteger: return ReadInteger(node, origin, k, config);
    case KeyType::kNumber: return ReadNumber(node, origin, k, config.*std::get<double C::*>(k.member));
    case KeyType::kDuration: return ReadDuration(node, origin, k, config.*std::get<int64_t C::*>(k.member));
  }
  return KeyError(origin, k.key, "unknown key");
}

// ---- Command-line flags ----

// One table key's flag: where CLI11 leaves its value until ApplyFlag copies it into the config.
struct FlagSlot {
  const ConfigKey* key = nullptr;
  std::string text;                // kString, kBytes, kDuration
  std::vector<std::string> texts;  // kStrings
  uint64_t integer = 0;            // kInteger (given: option->count() > 0; 0 may mean something)
  const CLI::Option* option = nullptr;
  double number = 0;               // kNumber
};

// "where models run: cpu, cuda:N (default "cpu")" for --help.
std::string HelpLine(const ConfigKey& k) {
  std::string line(k.doc);
  if (!k.values.empty()) absl::StrAppend(&line, ": ", k.values);
  if (k.type == KeyType::kNumber) absl::StrAppend(&line, " in ", RangeText(k, /*for_flag=*/true));
  if (!k.zero_means.empty()) absl::StrAppend(&line, "; ", ZeroText(k));
  if (k.type == KeyType::kStrings) absl::StrAppend(&line, "; repeatable");
  return absl::StrCat(line, " (default ", DefaultToml(k), ")");
}

void AddFlag(CLI::App& app, FlagSlot& slot) {
  const ConfigKey& k = *slot.key;
  const std::string name = k.FlagSpelling(), help = HelpLine(k);
  switch (k.type) {
    case KeyType::kStrings: app.add_option(name, slot.texts, help); break;
    case KeyType::kNumber: app.add_option(name, slot.number, help); break;
    case KeyType::kInteger:
      slot.option = app.add_option(name, slot.integer, help)
                        ->check(CLI::Range(static_cast<uint64_t>(k.range.lo), static_cast<uint64_t>(k.range.hi)));
      break;
    default: app.add_option(name, slot.text, help); break;
  }
}

// Copies a given flag into `config`: a flag left empty (or a number 0, but an integer's: given
// or not by its count) is not given and changes nothing.
absl::Status ApplyFlag(const FlagSlot& slot, DaemonConfig& config) {
  using C = DaemonConfig;
  const ConfigKey& k = *slot.key;
  switch (k.type) {
    case KeyType::kString:
      if (!slot.text.empty()) config.*std::get<std::string C::*>(k.member) = slot.text;
      break;
    case KeyType::kStrings:
      if (!slot.texts.empty()) config.*std::get<std::vector<std::string> C::*>(k.member) = slot.texts;
      break;
    case KeyType::kBytes:
      if (!slot.text.empty()) {
        auto parsed = ParseSize(slot.text);
        if (!parsed.ok()) {
          return absl::InvalidArgumentError(absl::StrCat(k.FlagSpelling(), ": ", parsed.status().message()));
        }
        config.*std::get<uint64_t C::*>(k.member) = *parsed;
      }
      break;
    case KeyType::kInteger:
      if (slot.option != nullptr && slot.option->count() > 0) StoreInteger(k, slot.integer, config);  // CLI11 checked the range
      break;
    case KeyType::kDuration:  // "0" is a duration here, not "not given"
      if (!slot.text.empty() &&
          !ParseDurationText(k, slot.text, config.*std::get<int64_t C::*>(k.member))) {
        return absl::InvalidArgumentError(
            absl::StrCat(k.FlagSpelling(), ": '", slot.text, "' ", DurationExpected(k)));
      }
      break;
    case KeyType::kNumber:
      if (slot.number != 0) {
        if (!InRange(k, slot.number, false)) {
          return absl::InvalidArgumentError(
              absl::StrCat(k.FlagSpelling(), ": ", slot.number, " is not in ", RangeText(k, /*for_flag=*/true)));
        }
        config.*std::get<double C::*>(k.member) = slot.number;
      }
      break;
    default: break;
  }
  return absl::OkStatus();
}

absl::Status ApplyTomlFile(const std::string& path, DaemonConfig& config) {
  if (std::filesystem::is_directory(path)) {
    return absl::InvalidArgumentError(absl::StrCat("--config: '", path, "' is a directory"));
  }
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--config: cannot read '", path, "'"));
  std::stringstream text;
  text << in.rdbuf();
  return ApplyToml(text.str(), path, config);
}

// Clients address the socket as unix://<absolute path>; log and serve that.
void NormalizeSocket(std::string& socket) {
  if (absl::StartsWith(socket, "unix://")) socket = socket.substr(7);
  if (std::error_code ec; !socket.empty()) {
    const std::filesystem::path absolute = std::filesystem::absolute(socket, ec);
    if (!ec) socket = absolute.lexically_normal().string();
  }
}

std::string MarkdownCell(absl::string_view text) { return absl::StrReplaceAll(text, {{"|", "\\|"}}); }

std::string MarkdownRow(const ConfigKey& k) {
  std::string name = absl::StrCat("`", k.key, "`");
  if (k.has_flag) absl::StrAppend(&name, " / `", k.FlagSpelling(), "`");
  std::string range(k.values);
  if (k.type == KeyType::kInteger || k.type == KeyType::kNumber) range = RangeText(k);
  std::string doc(k.doc);
  if (!k.zero_means.empty()) absl::StrAppend(&doc, "; ", ZeroText(k));
  return absl::StrCat("| ", name, " | ", TypeName(k.type), " | ", MarkdownCell(range), " | ", UnitName(k.unit),
                      " | `", DefaultToml(k), "` | ", k.reloadable ? "yes" : "no", " | ", MarkdownCell(doc),
                      " |\n");
}

}  // namespace

const std::vector<std::string>& DaemonConfigKeys() {
  static const std::vector<std::string>* kKeys = [] {
    auto* keys = new std::vector<std::string>;
    for (const ConfigKey& k : config_table::Keys()) keys->emplace_back(k.key);
    return keys;
  }();
  return *kKeys;
}

std::vector<std::string> ChangedKeys(const DaemonConfig& a, const DaemonConfig& b) {
  std::vector<std::string> changed;
  for (const ConfigKey& k : config_table::Keys()) {
    const bool differ = std::visit([&](auto member) { return !(a.*member == b.*member); }, k.member);
    if (differ) changed.emplace_back(k.key);
  }
  return changed;
}

const std::vector<std::string>& LiveReloadKeys() {
  static const std::vector<std::string>* kLive = [] {
    auto* keys = new std::vector<std::string>;
    for (const ConfigKey& k : config_table::Keys()) {
      if (k.reloadable) keys->emplace_back(k.key);
    }
    return keys;
  }();
  return *kLive;
}

absl::Duration KeepAlive(const DaemonConfig& config) {
  return config.keep_alive_ms == kDurationForever ? absl::InfiniteDuration() : absl::Milliseconds(config.keep_alive_ms);
}

absl::Status ApplyToml(const std::string& toml_text, const std::string& origin,
                       DaemonConfig& config) {
  toml::table table;
  try {
    table = toml::parse(toml_text, origin);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << origin << ": " << e.description() << " (line " << e.source().begin.line << ")";
    return absl::InvalidArgumentError(msg.str());
  }
  for (const auto& [name, node] : table) {
    const ConfigKey* key = FindKey(std::string(name.str()));
    if (key == nullptr) return KeyError(origin, std::string(name.str()), "unknown key");
    RETURN_IF_ERROR(ReadKey(*key, node, origin, config));
  }
  return ValidateConfig(config);
}

std::string ConfigReferenceMarkdown() {
  std::string out =
      "# fusiond configuration reference\n\n"
      "<!-- Generated from daemon/config/config_table.cc by `fusiond --config-reference > docs/CONFIG.md`;\n"
      "     do not edit: core_tests (ConfigReferenceTest) fails when this file and the table differ. -->\n\n"
      "Each key is read from the TOML file given with `--config` (packaging/fusiond.toml lists them all\n"
      "with their defaults); a key with a flag can also be given on the command line. Later wins:\n"
      "defaults, the file, `FUSIOND_SOCKET` (for `socket`), flags. Sizes are strings such as `\"512MiB\"`,\n"
      "`\"6GiB\"`, `\"1.5GB\"` or integers (bytes); durations are strings such as `\"24h\"`, `\"90m\"`.\n"
      "A flag given as 0 or empty is not given (a duration flag's `0` is a duration). On SIGHUP the\n"
      "file and flags are read again: keys marked reloadable take effect, a change to any other is\n"
      "logged as needing a restart.\n\n"
      "| key / flag | type | range | unit | default | reloadable | description |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const ConfigKey& k : config_table::Keys()) out += MarkdownRow(k);
  return out;
}

absl::StatusOr<DaemonConfig> ParseDaemonCommandLine(int argc, const char* const* argv) {
  CLI::App app{"fusiond: owns a GPU and runs face-fusion jobs for local programs over gRPC."};
  std::string config_path;
  app.add_option("--config", config_path, "TOML configuration file (flags override it)");
  std::vector<FlagSlot> flags;
  for (const ConfigKey& k : config_table::Keys()) {
    if (k.has_flag) flags.push_back(FlagSlot{&k});
  }
  for (FlagSlot& slot : flags) AddFlag(app, slot);  // `flags` no longer grows: the slots stay put
  // Answered by main() before any parsing (it knows what the binary was built against).
  bool version = false, reference = false;
  app.add_flag("--version", version, "print fusiond's version, its LibTorch and CUDA, and exit");
  app.add_flag("--config-reference", reference, "print docs/CONFIG.md")->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    return absl::CancelledError(app.help());
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(e.what());
  }
  if (reference) return absl::CancelledError(ConfigReferenceMarkdown());

  if (app.count("--config") > 0 && config_path.empty()) return absl::InvalidArgumentError("--config: empty path");
  if (app.count("--socket") > 0 && app["--socket"]->as<std::string>().empty()) {
    return absl::InvalidArgumentError("--socket: empty path");
  }
  DaemonConfig config;
  if (!config_path.empty()) {
    RETURN_IF_ERROR(ApplyTomlFile(config_path, config));
  }
  if (const char* env = std::getenv(kSocketEnv); env != nullptr && *env != '\0') config.socket = env;
  for (const FlagSlot& slot : flags) {
    RETURN_IF_ERROR(ApplyFlag(slot, config));
  }
  NormalizeSocket(config.socket);
  if (auto st = ValidateConfig(config); !st.ok()) return st;
  return config;
}

absl::StatusOr<std::pair<std::string, int>> ParseListenAddress(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat("metrics_listen '", listen,
                                                   "': expected HOST:PORT, e.g. 127.0.0.1:9464 or [::1]:9464"));
  };
  if (colon == std::string::npos || colon == 0) return bad();
  std::string host = listen.substr(0, colon);
  int port = -1;
  if (!absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) return bad();
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return bad();
    host = host.substr(1, host.size() - 2);
  } else if (host.find(':') != std::string::npos) {
    return bad();  // a bare IPv6 address needs brackets
  }
  return std::make_pair(host, port);
}

absl::Status ValidateConfig(const DaemonConfig& config) {
  if (config.socket.empty()) return absl::InvalidArgumentError("socket: must not be empty");
  if (!config.metrics_listen.empty()) {
    RETURN_IF_ERROR(ParseListenAddress(config.metrics_listen).status());
  }
  // sun_path holds 107 bytes; the companion socket adds ".fd".
  if (config.socket.size() + 3 > 107) {
    return absl::InvalidArgumentError(absl::StrCat("socket: '", config.socket, "' is ",
                                                   config.socket.size(),
                                                   " bytes; at most 104 fit a Unix socket path (with the \".fd\" companion)"));
  }
  if (config.device != "cpu") {
    uint32_t index = 0;
    const std::string digits = absl::StartsWith(config.device, "cuda:") ? config.device.substr(5) : "";
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit) ||
        !absl::SimpleAtoi(digits, &index)) {
      return absl::InvalidArgumentError(
          absl::StrCat("device: '", config.device, "' is not 'cpu' or 'cuda:N'"));
    }
  }
  static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};
  bool level_ok = false;
  for (const char* l : kLevels) level_ok |= config.log_level == l;
  if (!level_ok) {
    return absl::InvalidArgumentError(absl::StrCat("log_level: '", config.log_level,
                                                   "' is not one of trace|debug|info|warn|error|critical|off"));
  }
  if (auto policy = MakeEvictionPolicy(config.eviction_policy); !policy.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("eviction_policy: ", policy.status().message()));
  }
  if (config.max_message_bytes < 4096 || config.max_message_bytes > (1ull << 31) - 1) {
    return absl::InvalidArgumentError("max_message_bytes: must be in [4 KiB, 2 GiB)");
  }
  if (config.max_connections_per_uid > config.max_connections) {
    return absl::InvalidArgumentError(absl::StrCat("max_connections_per_uid: ", config.max_connections_per_uid,
                                                   " exceeds max_connections (", config.max_connections, ")"));
  }
  if (config.fd_max_connections_per_uid > config.fd_max_connections) {
    return absl::InvalidArgumentError(absl::StrCat("fd_max_connections_per_uid: ", config.fd_max_connections_per_uid,
                                                   " exceeds fd_max_connections (", config.fd_max_connections, ")"));
  }
  // gRPC must hold a largest request and its reply within the quota.
  if (config.grpc_memory_quota < 2 * config.max_message_bytes || config.grpc_memory_quota > (1ull << 40)) {
    return absl::InvalidArgumentError(absl::StrCat("grpc_memory_quota: ", config.grpc_memory_quota,
                                                   " bytes; must be in [2 x max_message_bytes (",
                                                   2 * config.max_message_bytes, "), 1 TiB]"));
  }
  return absl::OkStatus();
}

}  // namespace fusion
