// Conversions between fusion.v1 protobuf messages and the SDK's plain types.
#pragma once

#include "fusion/types.h"
#include "fusion/v1/fusion.pb.h"

namespace fusion::internal {

TierState FromProto(const v1::TierState& p);
ModelState FromProto(const v1::ModelInfo& p);
MemoryState FromProto(const v1::MemoryState& p);

}  // namespace fusion::internal
