// fusionctl output: JSON (byte counts as JSON numbers) and human-readable text.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "fusion/types.h"

namespace fusion::ctl {

nlohmann::json MemoryStateToJson(const MemoryState& state);
std::string MemoryStateToText(const MemoryState& state);

}  // namespace fusion::ctl
