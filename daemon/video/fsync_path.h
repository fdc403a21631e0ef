// fsync(2) by path: a written file's bytes, or a directory's entries after a rename, made
// durable (a video job's segments, the joined result, the published result).
// Thread-safety: none needed (no state).
#pragma once

#include <string>

namespace fusion::video {

// 0, or the errno of the open(2) or fsync(2) that failed; *call (if not null) is set to
// "open" or "fsync", naming which.
int FsyncPath(const std::string& path, bool directory, const char** call = nullptr);

}  // namespace fusion::video
