// Fuzz target: the TF.js weights-manifest parser (models/tfjs/weights_manifest.h), both forms
// (the bare array of groups and a model.json's "weightsManifest"). docs/FUZZING.md.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "models/tfjs/weights_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = fusion::tfjs::ParseManifest(text, "fuzz.json");
  if (!parsed.ok()) {
    FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  // DecodeWeights compares each group's bytes with its buffer and reads every tensor at
  // [offset, offset + bytes): those sizes must be exact, never wrapped.
  for (const fusion::tfjs::TensorEntry& t : parsed->tensors) {
    FUZZ_CHECK(t.group >= 0 && static_cast<size_t>(t.group) < parsed->groups.size());
    const uint64_t per = t.quantization == "uint8" ? 1 : t.quantization.empty() ? 4 : 2;
    FUZZ_CHECK(t.numel() >= 0);
    FUZZ_CHECK(t.bytes == static_cast<uint64_t>(t.numel()) * per);
    FUZZ_CHECK(t.offset + t.bytes >= t.offset);
    FUZZ_CHECK(t.offset + t.bytes <= parsed->groups[t.group].bytes);
  }
  return 0;
}
