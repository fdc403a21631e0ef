#include "pipeline/checkpoint.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace fusion {
namespace {

TEST(Checkpoint, NamesTheStageAndTheUnitThatDidNotRun) {
  int looks = 0;
  const Checkpoint cp("enhance", [&looks] { return ++looks >= 3; });
  EXPECT_TRUE(cp.Check("face", 0, 13).ok());
  const Checkpoint tiles = cp.Within("face 3 of 13");
  EXPECT_TRUE(tiles.Check("tile", 3, 16).ok());
  const absl::Status st = tiles.Check("tile", 4, 16);
  EXPECT_EQ(st.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(st.message(), "job cancelled during stage 'enhance' (face 3 of 13, tile 5 of 16)");
  EXPECT_EQ(cp.Check("face", 12, 13).message(), "job cancelled during stage 'enhance' (face 13 of 13)");
  EXPECT_EQ(looks, 4);
}

TEST(Checkpoint, GivesWayAtEveryCheckBeforeItLooksForACancelWithinToo) {
  std::vector<std::string> calls;
  bool cancel = false;
  const Checkpoint cp("detect", [&] { calls.push_back("cancelled?"); return cancel; },
                      [&] { calls.push_back("give way"); });
  EXPECT_TRUE(cp.Check("pass", 0, 3).ok());
  cancel = true;
  EXPECT_EQ(cp.Within("frame 2 of 9").Check("pass", 1, 3).code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, (std::vector<std::string>{"give way", "cancelled?", "give way", "cancelled?"}));
}

TEST(Checkpoint, DefaultNeverCancels) {
  const Checkpoint cp;
  EXPECT_TRUE(cp.Within("target image").Check("face", 0, 1).ok());
}

}  // namespace
}  // namespace fusion
