// fusionctl live's V4L2 paths (client/device_path.h, client/v4l2_io.h) on a machine with no
// camera and no v4l2loopback: which paths count as devices, and the errors for a missing
// /dev/videoN and for a character device that is not V4L2 (/dev/null), from the library and
// from `fusionctl live`.
// Reading a real camera and writing a real v4l2loopback device are NOT tested here.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "process.h"
#include "temp_dir.h"
#include "test_clips.h"
#include "device_path.h"
#include "v4l2_io.h"

namespace fusion::ctl {
namespace {

using fusion::testing::RunResult;

const std::string kSource = FUSION_TEST_DATA_DIR "/faces/astronaut_eileen_collins_512.png";
const std::string kPhoto = FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg";

// A /dev/videoN that does not exist on this machine.
std::string MissingVideoDevice() {
  for (int n = 0; n < 256; ++n) {
    const std::string path = absl::StrCat("/dev/video", n);
    if (access(path.c_str(), F_OK) != 0) return path;
  }
  return "";
}

TEST(V4l2PathTest, CharacterDevicesAreDevicesOtherPathsFilesAndAMissingDevPathIsNotFound) {
  fusion::testing::TempDir dir;
  const std::string file = dir.File("clip.mp4");
  { std::ofstream(file) << "x"; }
  EXPECT_EQ(*PathKindOf("/dev/null", "input"), PathKind::kDevice);
  EXPECT_EQ(*PathKindOf(file, "input"), PathKind::kFile);
  EXPECT_EQ(*PathKindOf(dir.File("to-be-written.mp4"), "output"), PathKind::kFile);  // created later
  const std::string missing = MissingVideoDevice();
  ASSERT_FALSE(missing.empty());
  auto in = PathKindOf(missing, "input");
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(in.status().message(), absl::StrCat("input ", missing, ": no such device (is the camera connected?)"));
  auto out = PathKindOf(missing, "output");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), absl::StrCat("output ", missing, ": no such device (is v4l2loopback loaded?)"));
}

TEST(V4l2PathTest, ACharacterDeviceThatIsNotV4l2IsRefusedNamingIt) {
  auto capture = V4l2Capture::Open("/dev/null");
  ASSERT_FALSE(capture.ok());
  EXPECT_EQ(capture.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(capture.status().message(), "input /dev/null: not a V4L2 capture device"))
      << capture.status();
  auto output = V4l2Output::Open("/dev/null", 64, 48, 30);
  ASSERT_FALSE(output.ok());
  EXPECT_EQ(output.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(output.status().message(), "output /dev/null: not a V4L2 output device (v4l2loopback)"))
      << output.status();
}

// `fusionctl live` with device paths: exit 2 (a path it cannot use) and the path named, before
// any daemon is asked (none runs here); no file is created under /dev.
class LiveV4l2CliTest : public ::testing::Test {
 protected:
  RunResult Live(const std::string& input, const std::string& output, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {FUSIONCTL_BIN, "--socket", dir_.File("none.sock"), "live", "--source", kSource,
                                     "--input", input, "-o", output};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return fusion::testing::RunProcess(argv, dir_.path(), absl::Seconds(60));
  }
  fusion::testing::TempDir dir_;
};

TEST_F(LiveV4l2CliTest, AMissingCameraIsExit2NamingIt) {
  const std::string missing = MissingVideoDevice();
  const RunResult r = Live(missing, dir_.File("out.mp4"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, absl::StrCat("fusionctl: live: input ", missing, ": no such device (is the camera connected?)\n"));
}

TEST_F(LiveV4l2CliTest, ACharacterDeviceThatIsNoCameraIsExit2NamingIt) {
  const RunResult r = Live("/dev/null", dir_.File("out.mp4"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("fusionctl: live: input /dev/null: not a V4L2 capture device"), std::string::npos) << r.err;
  const RunResult paced = Live("/dev/null", dir_.File("out.mp4"), {"--pace", "5"});
  EXPECT_EQ(paced.exit_code, 2);
  EXPECT_NE(paced.err.find("--pace does not apply to a device input"), std::string::npos) << paced.err;
}

TEST_F(LiveV4l2CliTest, AMissingOrNonV4l2OutputDeviceIsExit2NamingItAndNothingIsCreated) {
  const std::string clip = testclips::ZoomPanMp4(dir_.path(), kPhoto);
  ASSERT_FALSE(clip.empty());
  const std::string missing = MissingVideoDevice();
  const RunResult r = Live(clip, missing);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, absl::StrCat("fusionctl: live: output ", missing, ": no such device (is v4l2loopback loaded?)\n"));
  EXPECT_NE(access(missing.c_str(), F_OK), 0) << "a file was created at " << missing;
  const RunResult null_out = Live(clip, "/dev/null");
  EXPECT_EQ(null_out.exit_code, 2);
  EXPECT_NE(null_out.err.find("fusionctl: live: output /dev/null: not a V4L2 output device (v4l2loopback)"),
            std::string::npos)
      << null_out.err;
  struct stat st {};
  ASSERT_EQ(stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null is still the character device";
}

}  // namespace
}  // namespace fusion::ctl
