// JoinSegments: a video job's result MP4 from its chunks' segment files (each an MP4 holding
// the H.264 stream of one chunk of frames, written by Mp4Writer::CreateVideoOnly with the
// frames' own timestamps) and the other streams of the target (audio, subtitles) copied
// unchanged from the target's packets: a remux, nothing is decoded or encoded again.
//
// The packets are written in decode-time order, merged from the two sources one packet at a
// time, so memory is one packet of each plus FFmpeg's muxer index (~20 B per packet), whatever
// the video's length; each segment is read through a read-only mapping of its file.
// Every segment must carry the same H.264 parameters (one libx264 configuration per job);
// a segment whose codec header differs from the first's is refused (INTERNAL naming it).
// Errors: INTERNAL naming the stage, the segment and FFmpeg's text; RESOURCE_EXHAUSTED when
// the disk is full. The output is complete (trailer written, data fsynced) when OK returns;
// the caller renames it into place.
// Thread-safety: a free function; one call per output.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "video/video_reader.h"

namespace fusion::video {

// `packets`: a reader of the target opened with decode_video = false and the job's range.
// Streams MP4 cannot carry are dropped and named in `degradations`.
absl::Status JoinSegments(const std::vector<std::string>& segments, VideoReader& packets, const std::string& out_path,
                          std::vector<std::string>* degradations);

}  // namespace fusion::video
