// TF.js weights-manifest parser (the JSON part of tfjs/weights.h; no LibTorch, so it builds and
// is fuzzed without it). Format: see weights.h.
// Bounds: every member's type is checked before it is read (never a JSON exception); a
// tensor's bytes and a group's total are at most kMaxManifestBytes (INVALID_ARGUMENT naming the
// tensor or group), so numel(), bytes and offsets never overflow.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace fusion::tfjs {

// Largest tensor, and largest group of tensors, a manifest may declare: 16 GiB (the largest
// model in the catalogue is well under 1 GiB).
inline constexpr uint64_t kMaxManifestBytes = 16ull << 30;

// One entry of a weights manifest, with where its bytes are.
struct TensorEntry {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;         // "float32" or "int32"
  std::string quantization;  // "" (none), "uint8", "uint16" or "float16"
  double scale = 1.0;        // affine quantization only
  double min = 0.0;
  int group = 0;             // index of the group (shard set) holding it
  uint64_t offset = 0;       // byte offset in the group's concatenated shards
  uint64_t bytes = 0;        // bytes it occupies there
  int64_t numel() const;
};

struct ManifestGroup {
  std::vector<std::string> paths;  // shard files, relative to the manifest's directory
  uint64_t bytes = 0;              // sum of the tensors' bytes
};

struct ParsedManifest {
  std::vector<ManifestGroup> groups;
  std::vector<TensorEntry> tensors;
};

// Parses manifest JSON text: either the bare array of groups or an object with a
// "weightsManifest" array (a model.json). `origin` names it in errors.
absl::StatusOr<ParsedManifest> ParseManifest(std::string_view json_text, std::string_view origin);

}  // namespace fusion::tfjs
