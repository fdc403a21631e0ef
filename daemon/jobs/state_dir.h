// State directory: fusiond's private home for its lock, job journal and result files.
//
// Everything in it is the callers' images, so nothing in it is readable by another uid: the
// directory is 0700 and fusiond's own files in it are 0600 (directories 0700), whatever the
// umask fusiond was started with (fusiond also runs under umask 077, daemon/main.cc).
// PrepareStateDir() creates the directory that way, or, when it exists, checks that it and
// fusiond's files in it (StateFileNames(), and everything under results/ and inputs/) belong to the
// daemon's uid and takes group and other bits off them, with one warning naming what it
// changed. It leaves every other entry alone: the package's models/ folder stays root's.
// Errors: FAILED_PRECONDITION when the directory or one of fusiond's files in it belongs to
// another uid (a leftover of a `sudo fusiond` run): the message names the file, its owner and
// the chown command that fixes it; when the path is not a directory; when it cannot be created
// or changed (with strerror's text).
// Thread-safety: call once at start, before anything else opens the files.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace fusion::jobs {

// The daemon's files directly in the state directory: "lock", "journal.sqlite3" and SQLite's
// companions of it, and the journal's EndLedger (journal.sqlite3-ends). (results/ holds the video
// results and their parts.)
const std::vector<std::string>& StateFileNames();

// See the file comment. `owner` is the uid the state must belong to (geteuid() in fusiond).
absl::Status PrepareStateDir(const std::string& dir, uid_t owner);

}  // namespace fusion::jobs
