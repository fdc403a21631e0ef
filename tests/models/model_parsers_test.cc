// The no-LibTorch model-file parsers (tfjs/weights_manifest.h) on
// malformed input: each case is a shape a fuzz target (tests/fuzz) produced or its fix covers.
#include <gtest/gtest.h>

#include <string>

#include "models/tfjs/weights_manifest.h"

namespace fusion {
namespace {

absl::Status Manifest(const std::string& weight) {
  return tfjs::ParseManifest(R"([{"paths":["s"],"weights":[)" + weight + "]}]", "m.json").status();
}

TEST(TfjsManifest, WrongMemberTypesAreInvalidArgumentNotExceptions) {
  for (const char* w : {R"({"name":"a","shape":[1],"dtype":7})",
                        R"({"name":"a","shape":[1],"quantization":3})",
                        R"({"name":"a","shape":[1],"quantization":{"dtype":[]}})",
                        R"({"name":"a","shape":[1],"quantization":{}})"}) {
    absl::Status s = Manifest(w);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << w << ": " << s;
    EXPECT_NE(s.message().find("tensor 'a'"), std::string::npos) << s;
  }
}

TEST(TfjsManifest, SizesThatWouldOverflowAreRefused) {
  absl::Status s = Manifest(R"({"name":"big","shape":[4294967296,4294967296,4]})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("tensor 'big'"), std::string::npos) << s;
  // Each tensor fits, the group's total does not.
  s = Manifest(R"({"name":"a","shape":[4294967296]},{"name":"b","shape":[4294967296]},)"
               R"({"name":"c","shape":[4294967296]},{"name":"d","shape":[4294967296]},)"
               R"({"name":"e","shape":[4294967296]})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("group 0"), std::string::npos) << s;
  // A zero dimension is an empty tensor, not an error.
  auto ok = tfjs::ParseManifest(R"([{"paths":[],"weights":[{"name":"z","shape":[0,4294967296]}]}])", "m");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->tensors[0].bytes, 0u);
}

}  // namespace
}  // namespace fusion
