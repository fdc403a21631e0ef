// The frames' timestamps and the audio packets of a clip, read with VideoReader (the video
// tests compare a result with its input by these). Test failures are added on a read error.
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "video/video_reader.h"

namespace fusion::video {

struct Decoded {
  std::vector<double> frame_times;          // seconds
  std::vector<std::string> audio_packets;   // bytes of each audio packet, in order
};

inline Decoded DecodeAll(const std::string& bytes, FrameRange range = {}) {
  Decoded d;
  auto reader = VideoReader::Open(bytes, "clip", {.max_pixels = 100'000'000, .range = range});
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return d;
  Item item;
  for (;;) {
    auto more = (*reader)->Next(&item);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    if (item.kind == Item::Kind::kFrame) {
      d.frame_times.push_back((*reader)->PtsSeconds(item.frame.pts));
    } else if ((*reader)->StreamType(item.packet.stream_index()) == "audio") {
      d.audio_packets.emplace_back(item.packet.data());
    }
  }
  return d;
}

}  // namespace fusion::video
