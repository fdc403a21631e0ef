#include "test_clips.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace fusion::testclips {
namespace {

// Frames: 15 fps, 2 s; a 400x470 window pans 28 px/s right and 32 px/s down, scaled to
// 240x282 (crop sizes cannot vary per frame in FFmpeg's crop filter, so no zoom).
constexpr char kZoomPan[] = "crop=w=400:h=470:x='28*t':y='32*t',scale=240:282,setsar=1,format=yuv420p";

std::string Make(const std::string& path, const std::string& args) {
  if (!Ffmpeg(args + " '" + path + "'")) {
    ADD_FAILURE() << "ffmpeg could not make " << path;
    return "";
  }
  return path;
}

}  // namespace

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool Ffmpeg(const std::string& args) {
  const std::string cmd = "ffmpeg -hide_banner -loglevel error -nostdin -y " + args;
  return std::system(cmd.c_str()) == 0;
}

std::string ZoomPanLongMp4(const std::string& dir, const std::string& photo) {
  return Make(dir + "/zoompan_long.mp4",
              "-loop 1 -framerate 15 -t 8 -i '" + photo +
                  "' -f lavfi -i sine=frequency=440:sample_rate=44100:duration=8 -vf \"" +
                  "crop=w=400:h=470:x='28*mod(t,2)':y='32*mod(t,2)',scale=240:282,setsar=1,format=yuv420p" +
                  "\" -c:v libx264 -preset ultrafast -crf 23 -c:a aac -b:a 64k -movflags +faststart");
}

std::string ZoomPanMp4(const std::string& dir, const std::string& photo) {
  return Make(dir + "/zoompan.mp4",
              "-loop 1 -framerate 15 -t 2 -i '" + photo +
                  "' -f lavfi -i sine=frequency=440:sample_rate=44100:duration=2 -vf \"" + kZoomPan +
                  "\" -c:v libx264 -preset ultrafast -crf 23 -c:a aac -b:a 64k -movflags +faststart");
}

std::string ZoomPanWebm(const std::string& dir, const std::string& photo) {
  return Make(dir + "/zoompan.webm",
              "-loop 1 -framerate 15 -t 2 -i '" + photo +
                  "' -f lavfi -i sine=frequency=440:sample_rate=48000:duration=2 -vf \"" + kZoomPan +
                  "\" -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -b:v 300k -c:a libopus -b:a 48k");
}

std::string FaceThenGreyMp4(const std::string& dir, const std::string& photo) {
  return Make(dir + "/face_then_grey.mp4",
              "-loop 1 -framerate 15 -t 1 -i '" + photo +
                  "' -f lavfi -i color=c=gray:s=240x282:r=15:d=0.6 -f lavfi -i "
                  "sine=frequency=440:sample_rate=44100:duration=1.6 -filter_complex \"[0:v]" +
                  kZoomPan + "[a];[1:v]setsar=1,format=yuv420p[b];[a][b]concat=n=2:v=1:a=0[v]\" -map \"[v]\" "
                  "-map 2:a -c:v libx264 -preset ultrafast -crf 23 -c:a aac -b:a 64k -movflags +faststart");
}

std::string GreyMp4(const std::string& dir) {
  return Make(dir + "/grey.mp4",
              "-f lavfi -i color=c=gray:s=240x282:r=15:d=1 -c:v libx264 -preset ultrafast -crf 23 -pix_fmt yuv420p "
              "-movflags +faststart");
}

std::string FaceEntersMp4(const std::string& dir, const std::string& photo) {
  return Make(dir + "/face_enters.mp4",
              "-loop 1 -framerate 15 -t 1.6 -i '" + photo +
                  "' -f lavfi -i sine=frequency=440:sample_rate=44100:duration=1.6 -filter_complex \"[0:v]split[a][b];"
                  "[a]scale=400:300,boxblur=20[bg];[b]scale=180:210[fg];[bg][fg]overlay=x='max(150\\,400-210*t)':y=40,"
                  "format=yuv420p[v]\" -map \"[v]\" -map 1:a -c:v libx264 -preset ultrafast -crf 23 -c:a aac -b:a 64k "
                  "-movflags +faststart");
}

std::string AudioOnlyM4a(const std::string& dir) {
  return Make(dir + "/tone.m4a", "-f lavfi -i sine=frequency=440:sample_rate=44100:duration=1 -c:a aac -b:a 64k");
}

std::string Declares16KFramesMkv(const std::string& dir, std::string* unpatched) {
  const std::string small = Make(dir + "/small.mkv", "-f lavfi -i color=c=gray:s=320x256:r=10:d=1 -c:v libx264 -preset ultrafast");
  if (unpatched != nullptr) *unpatched = small;
  if (small.empty()) return "";
  std::string mkv = ReadFile(small);
  const std::string width("\xb0\x82\x01\x40", 4), height("\xba\x82\x01\x00", 4);
  const size_t w = mkv.find(width), h = mkv.find(height);
  if (w == std::string::npos || h == std::string::npos) {
    ADD_FAILURE() << "no 320x256 PixelWidth/PixelHeight elements in " << small;
    return "";
  }
  mkv.replace(w + 2, 2, std::string("\x40\x00", 2));
  mkv.replace(h + 2, 2, std::string("\x40\x00", 2));
  const std::string path = dir + "/declares_16k.mkv";
  std::ofstream(path, std::ios::binary) << mkv;
  return path;
}

std::string NoFramesY4m(const std::string& dir) {
  const std::string path = dir + "/empty.y4m";
  std::ofstream(path, std::ios::binary) << "YUV4MPEG2 W64 H64 F15:1 Ip A1:1 C420jpeg\n";
  return path;
}

}  // namespace fusion::testclips
