// TF.js weights-manifest reader: the binary weight format of TensorFlow.js models
// (face-api's "*-weights_manifest.json" and the "weightsManifest" of a layers/graph model.json).
//
// Format (https://www.tensorflow.org/js/guide/save_load, tfjs-core io/types.ts): a JSON array of
// groups {paths: [shard files], weights: [{name, shape, dtype, quantization?}]}. A group's shards
// concatenate into one buffer holding its tensors back to back in manifest order, without
// padding. A tensor is little-endian float32 (4 bytes/element), or quantized:
//   uint8 / uint16 affine: value = q * scale + min (per tensor);
//   float16: IEEE half, 2 bytes/element.
// Layouts stay as TF stores them (conv filters HWIO [kh,kw,Cin,Cout], depthwise [kh,kw,C,1],
// dense [in,out]); the networks permute them.
//
// Output: every tensor as a CPU float32 contiguous at::Tensor of the manifest's shape (int32
// tensors, e.g. shape constants in ssd_mobilenetv1's manifest, stay int32 and exact).
// Errors (INVALID_ARGUMENT / NOT_FOUND / DATA_LOSS) name the manifest, and the tensor or shard:
// unknown dtype, shards shorter or longer than the tensors need, a missing shard file.
// Thread-safety: WeightMap is a value type; concurrent const use is safe.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "models/tfjs/weights_manifest.h"

namespace fusion::tfjs {

using TensorMap = std::map<std::string, at::Tensor, std::less<>>;

// Named fp32 tensors of one model.
class WeightMap {
 public:
  WeightMap() = default;
  WeightMap(TensorMap tensors, std::string origin)
      : tensors_(std::move(tensors)), origin_(std::move(origin)) {}

  // The tensor `name`; NOT_FOUND naming the tensor and the manifest, or INVALID_ARGUMENT when
  // `shape` is given and differs (both shapes in the message).
  absl::StatusOr<at::Tensor> Get(std::string_view name, std::vector<int64_t> shape = {}) const;
  bool Contains(std::string_view name) const;
  size_t size() const { return tensors_.size(); }
  // Sum of numel * 4 over all tensors: the fp32 bytes a model made of them holds.
  uint64_t Fp32Bytes() const;
  const TensorMap& tensors() const { return tensors_; }
  const std::string& origin() const { return origin_; }

 private:
  TensorMap tensors_;
  std::string origin_;
};

// Decodes the tensors of a parsed manifest from the group buffers (one per group, shards
// already concatenated). DATA_LOSS when a buffer is shorter or longer than its tensors need.
absl::StatusOr<WeightMap> DecodeWeights(const ParsedManifest& manifest,
                                        const std::vector<std::string>& group_buffers,
                                        std::string_view origin);

// Reads a manifest file (either form) and its shards from the same directory.
absl::StatusOr<WeightMap> LoadWeights(const std::filesystem::path& manifest_path);

}  // namespace fusion::tfjs
