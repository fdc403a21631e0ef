#include "video/segment_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "video/fsync_path.h"
#include "base/status_macros.h"

namespace fusion::video {
namespace {

absl::Status OsError(absl::string_view doing, const std::string& path, int err) {
  return absl::InternalError(absl::StrCat("stage 'encode': cannot ", doing, " ", path, ": ", std::strerror(err)));
}

absl::Status Fsync(const std::string& path, bool directory) {
  const char* call = "";
  const int err = FsyncPath(path, directory, &call);
  return err == 0 ? absl::OkStatus() : OsError(call, path, err);
}

bool ReadCounts(const std::string& path, SegmentCounts* c) {
  std::ifstream f(path);
  if (!f) return false;
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  try {
    c->frames = j.at("frames").get<uint64_t>();
    c->frames_swapped = j.at("frames_swapped").get<uint64_t>();
    c->frames_without_face = j.at("frames_without_face").get<uint64_t>();
    c->faces_swapped = j.at("faces_swapped").get<uint64_t>();
    c->identity_distances = j.at("identity_distances").get<std::vector<float>>();
    // Tracking's counts; absent from the segments of a fusiond without tracking (0).
    c->keyframes = j.value("keyframes", uint64_t{0});
    c->frames_tracked = j.value("frames_tracked", uint64_t{0});
    c->tracks = j.value("tracks", uint64_t{0});
    c->flicker_input = j.value("flicker_input", 0.0);
    c->flicker_output = j.value("flicker_output", 0.0);
    if (!absl::Base64Unescape(j.value("tracker_state", std::string()), &c->tracker_state)) c->tracker_state.clear();
  } catch (const nlohmann::json::exception&) {
    return false;
  }
  return c->frames > 0;
}

}  // namespace

std::string SegmentStore::Path(size_t index, const char* ext) const {
  return absl::StrFormat("%s/%06d.%s", dir_, index, ext);
}

std::string SegmentStore::TempPath(size_t index) const { return Path(index, "mp4.tmp"); }

absl::StatusOr<SegmentStore> SegmentStore::Open(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("stage 'encode': cannot create ", dir, ": ", ec.message()));
  SegmentStore store(dir);
  for (size_t i = 0;; ++i) {
    SegmentCounts c;
    if (!std::filesystem::exists(store.Path(i, "mp4"), ec) || !ReadCounts(store.Path(i, "json"), &c)) break;
    store.committed_.push_back(std::move(c));
  }
  std::set<std::string> keep;
  for (size_t i = 0; i < store.committed_.size(); ++i) {
    keep.insert(store.Path(i, "mp4"));
    keep.insert(store.Path(i, "json"));
  }
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (keep.count(e.path().string()) == 0) std::filesystem::remove(e.path(), ec);
  }
  return store;
}

uint64_t SegmentStore::frames_committed() const {
  uint64_t n = 0;
  for (const SegmentCounts& c : committed_) n += c.frames;
  return n;
}

std::vector<std::string> SegmentStore::Paths() const {
  std::vector<std::string> paths;
  for (size_t i = 0; i < committed_.size(); ++i) paths.push_back(Path(i, "mp4"));
  return paths;
}

absl::Status SegmentStore::Commit(const SegmentCounts& counts) {
  const size_t index = committed_.size();
  const nlohmann::json j = {{"frames", counts.frames},
                            {"frames_swapped", counts.frames_swapped},
                            {"frames_without_face", counts.frames_without_face},
                            {"faces_swapped", counts.faces_swapped},
                            {"identity_distances", counts.identity_distances},
                            {"keyframes", counts.keyframes},
                            {"frames_tracked", counts.frames_tracked},
                            {"tracks", counts.tracks},
                            {"flicker_input", counts.flicker_input},
                            {"flicker_output", counts.flicker_output},
                            {"tracker_state", absl::Base64Escape(counts.tracker_state)}};
  const std::string json = Path(index, "json"), json_tmp = json + ".tmp";
  {
    std::ofstream f(json_tmp, std::ios::trunc);
    f << j.dump();
    f.close();
    if (!f) return OsError("write", json_tmp, errno);
  }
  RETURN_IF_ERROR(Fsync(json_tmp, false));
  if (std::rename(json_tmp.c_str(), json.c_str()) != 0) return OsError("rename", json_tmp, errno);
  const std::string segment = Path(index, "mp4");
  if (std::rename(TempPath(index).c_str(), segment.c_str()) != 0) return OsError("rename", TempPath(index), errno);
  RETURN_IF_ERROR(Fsync(dir_, true));
  committed_.push_back(counts);
  return absl::OkStatus();
}

}  // namespace fusion::video
