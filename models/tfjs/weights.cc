#include "models/tfjs/weights.h"

#include <ATen/ATen.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "models/common/exception_text.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace fusion::tfjs {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

// Converts one tensor's bytes to a float32 tensor (dequantizing if needed).
at::Tensor DecodeOne(const TensorEntry& t, const char* data) {
  const int64_t n = t.numel();
  at::Tensor out = at::empty({n}, at::kFloat);
  float* dst = out.data_ptr<float>();
  if (t.quantization.empty()) {
    std::memcpy(dst, data, n * sizeof(float));  // little-endian host, as TF.js writes
  } else if (t.quantization == "float16") {
    at::Tensor half = at::empty({n}, at::kHalf);
    std::memcpy(half.data_ptr(), data, n * 2);
    out.copy_(half);
  } else if (t.quantization == "uint8") {
    const auto* q = reinterpret_cast<const uint8_t*>(data);
    // TF.js dequantizes in double and stores float32 (io_utils.ts); do the same.
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(q[i] * t.scale + t.min);
  } else {  // uint16
    for (int64_t i = 0; i < n; ++i) {
      uint16_t q;
      std::memcpy(&q, data + 2 * i, 2);
      dst[i] = static_cast<float>(q * t.scale + t.min);
    }
  }
  // int32 tensors (shape constants in SSD's manifest) hold integers; keep them exact.
  if (t.dtype == "int32") {
    if (t.quantization.empty()) {
      at::Tensor raw = at::empty({n}, at::kInt);
      std::memcpy(raw.data_ptr(), data, n * 4);
      return raw.reshape(t.shape);
    }
    return out.round().to(at::kInt).reshape(t.shape);
  }
  return out.reshape(t.shape);
}

absl::StatusOr<std::string> ReadFile(const std::filesystem::path& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(what, " ", path.string(), " cannot be opened"));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("read error on ", path.string()));
  return ss.str();
}

}  // namespace

absl::StatusOr<WeightMap> DecodeWeights(const ParsedManifest& manifest,
                                        const std::vector<std::string>& group_buffers,
                                        std::string_view origin_view) {
  const std::string origin(origin_view);
  if (group_buffers.size() != manifest.groups.size()) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", group_buffers.size(),
                                                   " buffers for ", manifest.groups.size(), " groups"));
  }
  for (size_t g = 0; g < manifest.groups.size(); ++g) {
    if (group_buffers[g].size() == manifest.groups[g].bytes) continue;
    // Name the first tensor that does not fit, or say how many bytes are left over.
    for (const TensorEntry& t : manifest.tensors) {
      if (t.group == static_cast<int>(g) && t.offset + t.bytes > group_buffers[g].size()) {
        return absl::DataLossError(absl::StrCat(
            origin, ": tensor '", t.name, "' ", ShapeString(t.shape), " needs bytes ", t.offset,
            "..", t.offset + t.bytes, " but shards [", absl::StrJoin(manifest.groups[g].paths, ", "),
            "] hold ", group_buffers[g].size()));
      }
    }
    return absl::DataLossError(absl::StrCat(origin, ": shards [",
                                            absl::StrJoin(manifest.groups[g].paths, ", "), "] hold ",
                                            group_buffers[g].size(), " bytes, the tensors use ",
                                            manifest.groups[g].bytes));
  }
  TensorMap tensors;
  for (const TensorEntry& t : manifest.tensors) {
    if (tensors.count(t.name) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": tensor '", t.name, "' appears twice"));
    }
    try {  // allocation is the only thing that can throw here
      tensors.emplace(t.name, DecodeOne(t, group_buffers[t.group].data() + t.offset));
    } catch (const std::exception& e) {
      return absl::ResourceExhaustedError(
          absl::StrCat(origin, ": tensor '", t.name, "' ", ShapeString(t.shape), ": ", ExceptionText(e)));
    }
  }
  return WeightMap(std::move(tensors), origin);
}

absl::StatusOr<WeightMap> LoadWeights(const std::filesystem::path& manifest_path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(manifest_path, "weights manifest"));
  ASSIGN_OR_RETURN(ParsedManifest parsed, ParseManifest(text, manifest_path.string()));
  std::vector<std::string> buffers;
  for (const ManifestGroup& g : parsed.groups) {
    std::string buf;
    for (const std::string& p : g.paths) {
      ASSIGN_OR_RETURN(std::string shard, ReadFile(manifest_path.parent_path() / p, "weight shard"));
      buf += shard;
    }
    buffers.push_back(std::move(buf));
  }
  return DecodeWeights(parsed, buffers, manifest_path.string());
}

absl::StatusOr<at::Tensor> WeightMap::Get(std::string_view name_view,
                                          std::vector<int64_t> shape) const {
  const std::string name(name_view);
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrCat(origin_, ": no tensor '", name, "'"));
  }
  if (!shape.empty() && it->second.sizes().vec() != shape) {
    return absl::InvalidArgumentError(absl::StrCat(origin_, ": tensor '", name, "' has shape ",
                                                   ShapeString(it->second.sizes().vec()),
                                                   ", expected ", ShapeString(shape)));
  }
  return it->second;
}

bool WeightMap::Contains(std::string_view name) const { return tensors_.find(name) != tensors_.end(); }

uint64_t WeightMap::Fp32Bytes() const {
  uint64_t total = 0;
  for (const auto& [name, t] : tensors_) total += static_cast<uint64_t>(t.numel()) * 4;
  return total;
}

}  // namespace fusion::tfjs
