// SegmentStore: the durable checkpoints of one video job, a directory of chunk segments.
//
// A video job encodes its frames in chunks of N frames; chunk k becomes the segment file
// <dir>/<k, 6 digits>.mp4 (the chunk's H.264 stream, Mp4Writer::CreateVideoOnly) and its
// counts <dir>/<k>.json (frames, frames swapped / without a face, faces, identity distances,
// keyframes, tracked frames, tracks started, the flicker sums) with the tracking's state
// after its last frame (base64).
// Commit order: the counts are written to a temporary name, fsynced and renamed, then the
// segment's temporary file (complete and fsynced by Mp4Writer::Finish) is renamed, then the
// directory is fsynced. So a segment file under its final name is a completed chunk whose
// counts exist: the rename is the chunk's commit, and a crash (kill -9, power loss) at any
// point leaves either the whole chunk or none of it.
// Open() (the job's start, first run or resumed) keeps the committed segments 0..k-1 with no
// gap and removes everything else (temporaries, a segment after a gap, unreadable counts), so
// a resumed job redoes at most the one chunk that was in flight and never frame 0 of a
// committed chunk.
// The job removes the directory when it ends (published, failed, cancelled by its owner).
// Why files, not journal rows: the segment file must be durable anyway; one rename commits
// file and checkpoint together, where a row would be a second commit that can disagree with
// the file after a crash between the two.
// Errors: INTERNAL naming the directory or file and the OS error.
// Thread-safety: one thread at a time (the video job's encode thread after Open).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fusion::video {

struct SegmentCounts {
  uint64_t frames = 0;
  uint64_t frames_swapped = 0;
  uint64_t frames_without_face = 0;
  uint64_t faces_swapped = 0;
  std::vector<float> identity_distances;  // one per swapped face of the scored frames, in frame order
  uint64_t keyframes = 0;       // frames the detector scanned
  uint64_t frames_tracked = 0;  // frames with a face carried by tracking
  uint64_t tracks = 0;          // face tracks started
  // Sums over consecutive frames of a track (JobResult.flicker_ratio = output / input): the mean
  // gray change inside the face's region, of the input and of the output.
  double flicker_input = 0, flicker_output = 0;
  // Opaque bytes the job commits with the chunk and gets back when it resumes after it: the
  // face tracking's state after the chunk's last frame (pipeline/video_checkpoint.proto).
  std::string tracker_state;
};

class SegmentStore {
 public:
  // Creates `dir` if needed and scans it (see above).
  static absl::StatusOr<SegmentStore> Open(const std::string& dir);

  const std::vector<SegmentCounts>& committed() const { return committed_; }
  // Frames in the committed segments: the frames a resumed job does not process again.
  uint64_t frames_committed() const;
  // Final paths of the committed segments, in order.
  std::vector<std::string> Paths() const;
  // Where segment `index` is written before Commit (the next segment: committed().size()).
  std::string TempPath(size_t index) const;
  // Commits the segment at TempPath(committed().size()) (complete and fsynced) with `counts`.
  absl::Status Commit(const SegmentCounts& counts);

 private:
  explicit SegmentStore(std::string dir) : dir_(std::move(dir)) {}
  std::string Path(size_t index, const char* ext) const;

  std::string dir_;
  std::vector<SegmentCounts> committed_;
};

}  // namespace fusion::video
