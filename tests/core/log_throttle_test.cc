#include "common/log_throttle.h"

#include <gtest/gtest.h>

namespace fusion {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

TEST(LogThrottle, AdmitsOncePerIntervalAndCountsWhatItHeldBack) {
  LogThrottle t(absl::Minutes(1));
  uint64_t held = 99;
  EXPECT_TRUE(t.Admit(7, kT0, &held));
  EXPECT_EQ(held, 0u);
  for (int i = 1; i <= 5; ++i) EXPECT_FALSE(t.Admit(7, kT0 + absl::Seconds(i), &held));
  EXPECT_TRUE(t.Admit(8, kT0 + absl::Seconds(2), &held)) << "another key has its own interval";
  EXPECT_EQ(held, 0u);
  EXPECT_FALSE(t.Admit(7, kT0 + absl::Seconds(59), &held));
  EXPECT_TRUE(t.Admit(7, kT0 + absl::Seconds(60), &held));
  EXPECT_EQ(held, 6u) << "the 6 refused calls of key 7 are reported once";
  EXPECT_FALSE(t.Admit(7, kT0 + absl::Seconds(61), &held));
  EXPECT_TRUE(t.Admit(7, kT0 + absl::Seconds(121), &held));
  EXPECT_EQ(held, 1u);
}

TEST(LogThrottle, ForgetsTheStalestKeyBeyondItsCapacity) {
  LogThrottle t(absl::Minutes(1), /*max_keys=*/2);
  uint64_t held = 0;
  EXPECT_TRUE(t.Admit(1, kT0, &held));
  EXPECT_TRUE(t.Admit(2, kT0 + absl::Seconds(1), &held));
  EXPECT_TRUE(t.Admit(3, kT0 + absl::Seconds(2), &held));  // drops key 1, the stalest
  EXPECT_TRUE(t.Admit(1, kT0 + absl::Seconds(3), &held)) << "key 1 was forgotten, so it is new again";
  EXPECT_FALSE(t.Admit(3, kT0 + absl::Seconds(4), &held)) << "key 3 is still remembered";
}

}  // namespace
}  // namespace fusion
