#include "base/size.h"

#include <gtest/gtest.h>

namespace fusion {
namespace {

TEST(ParseSize, BinaryUnitsArePowersOf1024) {
  EXPECT_EQ(*ParseSize("512MiB"), 536870912u);
  EXPECT_EQ(*ParseSize("256MiB"), 268435456u);
  EXPECT_EQ(*ParseSize("6GiB"), 6442450944u);
  EXPECT_EQ(*ParseSize("1KiB"), 1024u);
  EXPECT_EQ(*ParseSize("2TiB"), 2199023255552u);
}

TEST(ParseSize, DecimalUnitsArePowersOf1000) {
  EXPECT_EQ(*ParseSize("1.5GB"), 1500000000u);
  EXPECT_EQ(*ParseSize("10MB"), 10000000u);
  EXPECT_EQ(*ParseSize("3kb"), 3000u);
}

TEST(ParseSize, PlainBytesAndSpacesAndCase) {
  EXPECT_EQ(*ParseSize("1048576"), 1048576u);
  EXPECT_EQ(*ParseSize("0"), 0u);
  EXPECT_EQ(*ParseSize("12B"), 12u);
  EXPECT_EQ(*ParseSize(" 64 mib "), 67108864u);
  EXPECT_EQ(*ParseSize("1.5GiB"), 1610612736u);
  EXPECT_EQ(*ParseSize("0.5KiB"), 512u);
}

TEST(ParseSize, BadSizesAreInvalidArgumentQuotingTheText) {
  for (const char* bad : {"", "MiB", "12XB", "-5MiB", "1.5", "1..5GB", "abc", "5 MiBs",
                          "99999999999999999999", "20000000TiB"}) {
    auto r = ParseSize(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << r.status().message();
  }
}

TEST(FormatBytes, UsesBinaryUnits) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(268435456), "256.0 MiB");
  EXPECT_EQ(FormatBytes(1610612736), "1.5 GiB");
}

}  // namespace
}  // namespace fusion
