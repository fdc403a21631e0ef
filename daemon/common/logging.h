// Logging setup for fusiond (spdlog). Under systemd (JOURNAL_STREAM set) logs go to the journal
// with priorities; otherwise to stderr, coloured only when stderr is a terminal.
// Call once at start-up, before other threads log.
#pragma once

#include <string>

namespace fusion {

// `level`: trace|debug|info|warn|error|critical|off (validated by the config).
void InitLogging(const std::string& level);

// Changes the level of the logger InitLogging made (a SIGHUP reload). Thread-safe.
void SetLogLevel(const std::string& level);

}  // namespace fusion
