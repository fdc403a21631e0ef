// Short test clips made by the tests themselves with Debian's `ffmpeg` CLI from the bundled
// photos (nothing downloaded): a slow pan over grace_hopper with a 440-Hz sine track.
// Each function writes into `dir` and returns the file's path; it fails the test (ADD_FAILURE)
// and returns "" when ffmpeg fails.
#pragma once

#include <string>

namespace fusion::testclips {

// Reads a whole file ("" if it cannot).
std::string ReadFile(const std::string& path);
// Runs `ffmpeg -hide_banner -loglevel error -y ARGS`; true on exit 0.
bool Ffmpeg(const std::string& args);

// 2 s at 15 fps (30 frames), 240x282, H.264 + AAC in MP4 (moov first: +faststart).
std::string ZoomPanMp4(const std::string& dir, const std::string& photo);
// The same pan played 4 times over (8 s, 120 frames; a jump back every 2 s), H.264 + AAC in MP4:
// a video job that lasts while other work runs beside it.
std::string ZoomPanLongMp4(const std::string& dir, const std::string& photo);
// The same picture as VP9 + Opus in WebM.
std::string ZoomPanWebm(const std::string& dir, const std::string& photo);
// 1 s of the zoom/pan, then 0.6 s of flat grey (9 frames without a face), H.264 + AAC in MP4.
std::string FaceThenGreyMp4(const std::string& dir, const std::string& photo);
// 1 s of flat grey at 15 fps (15 frames, no face), 240x282, H.264 in MP4.
std::string GreyMp4(const std::string& dir);
// 1.6 s at 15 fps (24 frames), 400x300: `photo` scaled to 180x210 slides in from the right edge
// (14 px a frame; grace_hopper's face shows from frame 6, whole from about 12) over a blurred
// copy of itself and stops at x = 150 from frame 18; H.264 + AAC in MP4.
std::string FaceEntersMp4(const std::string& dir, const std::string& photo);
// The sine track alone in MP4 (no video stream).
std::string AudioOnlyM4a(const std::string& dir);
// A 1-s 320x256 H.264 MKV whose header is patched to declare 16384x16384 frames (PixelWidth,
// EBML id 0xB0, and PixelHeight, 0xBA: 2-byte values rewritten in place). *unpatched (if not
// null) gets the path of the file before the patch.
std::string Declares16KFramesMkv(const std::string& dir, std::string* unpatched = nullptr);
// A YUV4MPEG2 file with a valid 64x64 stream header and no FRAME: a video stream without frames.
// (FFmpeg's own -frames:v 0 output is no valid file at all: MKV without tracks, MP4 without a
// sample description.)
std::string NoFramesY4m(const std::string& dir);

}  // namespace fusion::testclips
