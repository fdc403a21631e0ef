// Fuzz target: fusiond's TOML configuration (daemon/config/config.h ApplyToml): toml++'s parser
// and every key's type and range checks. docs/FUZZING.md.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  fusion::DaemonConfig config;
  absl::Status st = fusion::ApplyToml(text, "fuzz.toml", config);
  if (!st.ok()) FUZZ_CHECK(st.code() == absl::StatusCode::kInvalidArgument);
  return 0;
}
