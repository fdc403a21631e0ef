#include "memory/residency_types.h"

namespace fusion {

const char* ToString(ModelState state) {
  switch (state) {
    case ModelState::kAbsent: return "ABSENT";
    case ModelState::kLoading: return "LOADING";
    case ModelState::kHost: return "HOST";
    case ModelState::kUploading: return "UPLOADING";
    case ModelState::kDevice: return "DEVICE";
    case ModelState::kInUse: return "IN_USE";
    case ModelState::kEvicting: return "EVICTING";
  }
  return "UNKNOWN";
}

const char* ToString(Tier tier) {
  switch (tier) {
    case Tier::kStorage: return "storage";
    case Tier::kHost: return "host";
    case Tier::kDevice: return "device";
  }
  return "unknown";
}

Tier TierOf(ModelState state) {
  switch (state) {
    case ModelState::kAbsent:
    case ModelState::kLoading: return Tier::kStorage;
    case ModelState::kHost:
    case ModelState::kUploading: return Tier::kHost;
    case ModelState::kDevice:
    case ModelState::kInUse:
    case ModelState::kEvicting: return Tier::kDevice;
  }
  return Tier::kStorage;
}

}  // namespace fusion
