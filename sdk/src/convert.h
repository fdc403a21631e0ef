// Conversions between fusion.v1 protobuf messages and the SDK's plain types.
#pragma once

#include "fusion/types.h"
#include "fusion/v1/fusion.pb.h"

namespace fusion::internal {

TierState FromProto(const v1::TierState& p);
ModelStatus FromProto(const v1::ModelInfo& p);
MemoryState FromProto(const v1::MemoryState& p);
JobInfo FromProto(const v1::Job& p);
LiveSessionStatus FromProto(const v1::LiveSessionInfo& p);
StageReport FromProto(const v1::StageReport& p);
JobEvent FromProto(const v1::JobEvent& p);
// Everything but the image.
JobResult FromProto(const v1::JobResult& p);
v1::JobOptions ToProto(const SwapOptions& o);

}  // namespace fusion::internal
