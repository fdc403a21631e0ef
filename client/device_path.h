// Which of fusionctl live's paths are Video4Linux2 devices (docs/USER-GUIDE.md#cameras-and-
// virtual-cameras-v4l2): a character device is one; a path under /dev/ that does not exist is an
// error naming it (a camera not plugged in, v4l2loopback not loaded), never a file to create;
// anything else is a file (the caller opens or creates it and reports what fails).
// Errors: NOT_FOUND for a missing path under /dev/.
// Thread-safety: a pure function of the file system.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace fusion::ctl {

enum class PathKind { kFile, kDevice };

// What `path` is; `role` ("input" or "output") names it in messages.
absl::StatusOr<PathKind> PathKindOf(const std::string& path, const std::string& role);

}  // namespace fusion::ctl
