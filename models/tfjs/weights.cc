#include "models/tfjs/weights.h"

#include <ATen/ATen.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "models/common/exception_text.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace fusion::tfjs {
namespace {

using nlohmann::json;

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

int BytesPerElement(const std::string& quantization) {
  if (quantization == "uint8") return 1;
  if (quantization == "uint16" || quantization == "float16") return 2;
  return 4;
}

absl::Status ParseEntry(const json& w, const std::string& origin, TensorEntry& t) {
  if (!w.is_object() || !w.contains("name") || !w["name"].is_string()) {
    return absl::InvalidArgumentError(origin + ": a weight entry has no name");
  }
  t.name = w["name"].get<std::string>();
  const std::string where = absl::StrCat(origin, ": tensor '", t.name, "'");
  if (!w.contains("shape") || !w["shape"].is_array()) {
    return absl::InvalidArgumentError(where + ": no shape");
  }
  for (const json& d : w["shape"]) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return absl::InvalidArgumentError(where + ": shape has a non-integer or negative dimension");
    }
    t.shape.push_back(d.get<int64_t>());
  }
  t.dtype = w.value("dtype", std::string("float32"));
  if (t.dtype != "float32" && t.dtype != "int32") {
    return absl::InvalidArgumentError(absl::StrCat(where, ": dtype '", t.dtype,
                                                   "' is not supported (float32, int32)"));
  }
  if (auto q = w.find("quantization"); q != w.end()) {
    t.quantization = q->value("dtype", std::string());
    if (t.quantization != "uint8" && t.quantization != "uint16" && t.quantization != "float16") {
      return absl::InvalidArgumentError(absl::StrCat(where, ": quantization dtype '",
                                                     t.quantization, "' is not supported"));
    }
    if (t.quantization != "float16") {
      if (!q->contains("scale") || !q->contains("min") || !(*q)["scale"].is_number() ||
          !(*q)["min"].is_number()) {
        return absl::InvalidArgumentError(where + ": affine quantization needs scale and min");
      }
      t.scale = (*q)["scale"].get<double>();
      t.min = (*q)["min"].get<double>();
    }
  }
  t.bytes = static_cast<uint64_t>(t.numel()) * BytesPerElement(t.quantization);
  return absl::OkStatus();
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

int64_t TensorEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::StatusOr<ParsedManifest> ParseManifest(std::string_view json_text, std::string_view origin_view) {
  const std::string origin(origin_view);
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError(origin + ": not valid JSON");
  if (doc.is_object() && doc.contains("weightsManifest")) doc = doc["weightsManifest"];
  if (!doc.is_array()) {
    return absl::InvalidArgumentError(origin + ": expected an array of weight groups");
  }
  ParsedManifest out;
  for (const json& g : doc) {
    ManifestGroup group;
    if (!g.is_object() || !g.contains("paths") || !g["paths"].is_array() ||
        !g.contains("weights") || !g["weights"].is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": group ", out.groups.size(), " needs 'paths' and 'weights' arrays"));
    }
    for (const json& p : g["paths"]) {
      if (!p.is_string()) return absl::InvalidArgumentError(origin + ": a shard path is not a string");
      group.paths.push_back(p.get<std::string>());
    }
    for (const json& w : g["weights"]) {
      TensorEntry t;
      if (auto s = ParseEntry(w, origin, t); !s.ok()) return s;
      t.group = static_cast<int>(out.groups.size());
      t.offset = group.bytes;
      group.bytes += t.bytes;
      out.tensors.push_back(std::move(t));
    }
    out.groups.push_back(std::move(group));
  }
  return out;
}

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
  absl::StatusOr<std::string> text = ReadFile(manifest_path, "weights manifest");
  if (!text.ok()) return text.status();
  absl::StatusOr<ParsedManifest> parsed = ParseManifest(*text, manifest_path.string());
  if (!parsed.ok()) return parsed.status();
  std::vector<std::string> buffers;
  for (const ManifestGroup& g : parsed->groups) {
    std::string buf;
    for (const std::string& p : g.paths) {
      absl::StatusOr<std::string> shard = ReadFile(manifest_path.parent_path() / p, "weight shard");
      if (!shard.ok()) return shard.status();
      buf += *shard;
    }
    buffers.push_back(std::move(buf));
  }
  return DecodeWeights(*parsed, buffers, manifest_path.string());
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
