// The reduced-precision comparison (models/common/precision_check.h) that the per-model fp16
// test (tests/gpu/reduced_precision_test.cc) and its CPU bf16 twin apply: no LibTorch.
#include "models/common/precision_check.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

namespace fusion::models {
namespace {

TEST(PrecisionCheck, FindsTheLargestDifferenceAndWhereItIs) {
  const std::vector<float> fp32{1.0f, -2.0f, 100.0f, 0.5f};
  const std::vector<float> fp16{1.001f, -2.25f, 100.125f, 0.5f};
  const OutputDifference d = CompareOutputs(fp32, fp16);
  EXPECT_NEAR(d.max_abs, 0.25, 1e-6);
  EXPECT_EQ(d.at, 1u);
  EXPECT_FLOAT_EQ(d.reference_at, -2.0f);
  EXPECT_EQ(d.non_finite, 0u);
  EXPECT_EQ(d.count, 4u);
}

TEST(PrecisionCheck, WithinTheToleranceIsOkAboveItNamesModelPrecisionAndFigures) {
  const std::vector<float> fp32{10.0f, 20.0f, 30.0f};
  const std::vector<float> half{10.2f, 19.9f, 30.0f};
  EXPECT_TRUE(CheckReducedPrecision("tiny_face_detector", "fp16", fp32, half, 0.25).ok());
  const absl::Status s = CheckReducedPrecision("tiny_face_detector", "fp16", fp32, half, 0.1);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("tiny_face_detector: fp16 output differs from fp32 by up to 0.2"), std::string::npos) << s;
  EXPECT_NE(s.message().find("(at 0, fp32 10)"), std::string::npos) << s;
  EXPECT_NE(s.message().find("above the tolerance 0.1"), std::string::npos) << s;
}

TEST(PrecisionCheck, AnOverflowIsAnErrorWhateverTheTolerance) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> fp32{70000.0f, 1.0f, 2.0f};
  const std::vector<float> fp16{inf, nan, 2.0f};  // 70000 is above fp16's largest, 65504
  EXPECT_EQ(CompareOutputs(fp32, fp16).non_finite, 2u);
  const absl::Status s = CheckReducedPrecision("esrgan-slim-x4", "fp16", fp32, fp16, 1e9);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("esrgan-slim-x4: 2 of 3 fp16 output values are NaN or Inf"), std::string::npos) << s;
}

TEST(PrecisionCheck, MismatchedOrUnusableReferencesAreInvalidArguments) {
  const std::vector<float> three{1, 2, 3}, two{1, 2}, none;
  EXPECT_EQ(CheckReducedPrecision("m", "bf16", three, two, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckReducedPrecision("m", "bf16", none, none, 1).code(), absl::StatusCode::kInvalidArgument);
  const std::vector<float> bad_ref{1, std::numeric_limits<float>::quiet_NaN(), 3};
  const absl::Status s = CheckReducedPrecision("m", "bf16", bad_ref, three, 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("the fp32 output is not finite at 1"), std::string::npos) << s;
}

}  // namespace
}  // namespace fusion::models
