// TF.js weights-manifest parser (weights_manifest.h).
#include "models/tfjs/weights_manifest.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace fusion::tfjs {
namespace {

using nlohmann::json;

std::string ShapeText(const std::vector<int64_t>& shape) {
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
  // json::value() throws on a wrong type: every optional member's type is checked first.
  if (auto d = w.find("dtype"); d != w.end() && !d->is_string()) {
    return absl::InvalidArgumentError(where + ": dtype is not a string");
  }
  t.dtype = w.value("dtype", std::string("float32"));
  if (t.dtype != "float32" && t.dtype != "int32") {
    return absl::InvalidArgumentError(absl::StrCat(where, ": dtype '", t.dtype,
                                                   "' is not supported (float32, int32)"));
  }
  if (auto q = w.find("quantization"); q != w.end()) {
    if (!q->is_object() || !q->contains("dtype") || !(*q)["dtype"].is_string()) {
      return absl::InvalidArgumentError(where + ": quantization needs a dtype string");
    }
    t.quantization = (*q)["dtype"].get<std::string>();
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
  // Bounded before it is multiplied out: a shape like [2^32, 2^32] must not wrap.
  const uint64_t per = BytesPerElement(t.quantization);
  uint64_t bytes = per;
  for (int64_t d : t.shape) {
    if (d != 0 && bytes > kMaxManifestBytes / static_cast<uint64_t>(d)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": shape ", ShapeText(t.shape), " is larger than ",
                                                     kMaxManifestBytes, " bytes"));
    }
    bytes *= static_cast<uint64_t>(d);
  }
  t.bytes = bytes;
  return absl::OkStatus();
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
      if (t.bytes > kMaxManifestBytes - group.bytes) {
        return absl::InvalidArgumentError(absl::StrCat(origin, ": group ", out.groups.size(),
                                                       " holds more than ", kMaxManifestBytes, " bytes"));
      }
      group.bytes += t.bytes;
      out.tensors.push_back(std::move(t));
    }
    out.groups.push_back(std::move(group));
  }
  return out;
}

}  // namespace fusion::tfjs
