#include "catalogue.h"

#include <openssl/evp.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "base/status_macros.h"

namespace fusion::models {
namespace {

using nlohmann::json;

// Reads key `key` of `obj` as T; INVALID_ARGUMENT naming `where` and the key otherwise.
template <typename T>
absl::Status Read(const json& obj, const char* key, const std::string& where, T& out,
                  bool required = true) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (!required) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(where, ": missing key '", key, "'"));
  }
  try {
    out = it->get<T>();
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": key '", key, "' has the wrong type (", it->type_name(), ")"));
  }
  return absl::OkStatus();
}

bool IsSha256Hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!absl::ascii_isdigit(c) && !(c >= 'a' && c <= 'f')) return false;
  }
  return true;
}

absl::Status ParseFile(const json& j, const std::string& where, ModelFile& f) {
  if (!j.is_object()) return absl::InvalidArgumentError(where + ": a file entry is not an object");
  if (auto s = Read(j, "path", where, f.path); !s.ok()) return s;
  const std::string fw = absl::StrCat(where, " file '", f.path, "'");
  if (f.path.empty() || f.path.front() == '/' || f.path.find("..") != std::string::npos) {
    return absl::InvalidArgumentError(fw + ": path must be relative and stay inside the models dir");
  }
  if (auto s = Read(j, "sha256", fw, f.sha256); !s.ok()) return s;
  if (!IsSha256Hex(f.sha256)) {
    return absl::InvalidArgumentError(fw + ": sha256 must be 64 lowercase hex digits");
  }
  if (auto s = Read(j, "file_bytes", fw, f.file_bytes); !s.ok()) return s;
  if (auto s = Read(j, "package", fw, f.package, false); !s.ok()) return s;
  return Read(j, "member", fw, f.member, false);
}

// default_precision runs on the CPU device, cuda_precision on CUDA; a reduced one needs a
// stated tolerance and a network that applies it (the Keras interpreter's enhance models).
absl::Status CheckPrecision(const ModelSpec& m, const std::string& where) {
  if (m.default_precision != "fp32" && m.default_precision != "bf16") {
    return absl::InvalidArgumentError(absl::StrCat(where, ": default_precision (the CPU device's) must be fp32 or bf16, not '",
                                                   m.default_precision, "'"));
  }
  if (m.cuda_precision != "fp32" && m.cuda_precision != "fp16") {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": cuda_precision must be fp32 or fp16, not '", m.cuda_precision, "'"));
  }
  const bool reduced = m.default_precision != "fp32" || m.cuda_precision != "fp32";
  if (reduced && m.format != "keras-layers-model") {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": a reduced precision applies only to keras-layers-model (enhance) models"));
  }
  if (reduced && !(m.reduced_precision_tolerance > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": a reduced precision needs reduced_precision_tolerance > 0 (max abs output difference)"));
  }
  return absl::OkStatus();
}

// The optional "keep_alive": an absl duration string >= 0 ("90s", "10m", "0") or "forever".
absl::Status ReadKeepAlive(const json& j, const std::string& where, std::optional<absl::Duration>& out) {
  std::string text;
  if (j.find("keep_alive") == j.end()) return absl::OkStatus();
  RETURN_IF_ERROR(Read(j, "keep_alive", where, text));
  absl::Duration d;
  if (text == "forever") {
    d = absl::InfiniteDuration();
  } else if (!absl::ParseDuration(text, &d) || d < absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": keep_alive must be a duration like \"90s\" or \"10m\", \"0\" or \"forever\", not '", text, "'"));
  }
  out = d;
  return absl::OkStatus();
}

absl::Status ParseModel(const json& j, const std::string& origin, ModelSpec& m) {
  if (!j.is_object()) return absl::InvalidArgumentError(origin + ": a model entry is not an object");
  if (auto s = Read(j, "name", origin, m.name); !s.ok()) return s;
  const std::string where = absl::StrCat(origin, ": model '", m.name, "'");
  absl::Status s;
  s.Update(Read(j, "stage", where, m.stage));
  s.Update(Read(j, "format", where, m.format));
  s.Update(Read(j, "device_bytes", where, m.device_bytes));
  s.Update(Read(j, "working_set_bytes_per_pixel", where, m.working_set_bytes_per_pixel));
  s.Update(Read(j, "default_precision", where, m.default_precision));
  s.Update(Read(j, "cuda_precision", where, m.cuda_precision, false));
  s.Update(Read(j, "reduced_precision_tolerance", where, m.reduced_precision_tolerance, false));
  s.Update(Read(j, "pinned_by_default", where, m.pinned_by_default));
  s.Update(Read(j, "one_shot", where, m.one_shot));
  s.Update(Read(j, "tileable", where, m.tileable));
  s.Update(ReadKeepAlive(j, where, m.keep_alive));
  s.Update(Read(j, "input", where, m.input, false));
  s.Update(Read(j, "license", where, m.license));
  s.Update(Read(j, "source", where, m.source));
  if (!s.ok()) return s;
  RETURN_IF_ERROR(CheckPrecision(m, where));
  auto files = j.find("files");
  if (files == j.end() || !files->is_array()) {
    return absl::InvalidArgumentError(where + ": 'files' must be an array");
  }
  for (const json& fj : *files) {
    ModelFile f;
    if (auto st = ParseFile(fj, where, f); !st.ok()) return st;
    m.files.push_back(std::move(f));
  }
  return absl::OkStatus();
}

std::string RestoreHint(const std::filesystem::path& models_dir) {
  return absl::StrCat("run `", kFetchCommand, " ", models_dir.string(), "` to restore it");
}

}  // namespace

uint64_t ModelSpec::TotalFileBytes() const {
  uint64_t total = 0;
  for (const ModelFile& f : files) total += f.file_bytes;
  return total;
}

absl::StatusOr<std::unique_ptr<ModelCatalogue>> ModelCatalogue::Create(const Options& options) {
  std::ifstream in(options.manifest, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("model catalogue ", options.manifest.string(), " cannot be opened"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return FromJson(text.str(), options.manifest.string(), options.models_dir);
}

absl::StatusOr<std::unique_ptr<ModelCatalogue>> ModelCatalogue::FromJson(
    std::string_view json_text, std::string_view origin_view, std::filesystem::path models_dir) {
  const std::string origin(origin_view);
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return absl::InvalidArgumentError(origin + ": not valid JSON");
  int schema = 0;
  if (!doc.is_object()) return absl::InvalidArgumentError(origin + ": top level is not an object");
  if (auto s = Read(doc, "schema", origin, schema); !s.ok()) return s;
  if (schema != 1) {
    return absl::InvalidArgumentError(absl::StrCat(origin, ": schema ", schema, " is not 1"));
  }
  auto list = doc.find("models");
  if (list == doc.end() || !list->is_array()) {
    return absl::InvalidArgumentError(origin + ": 'models' must be an array");
  }
  std::vector<ModelSpec> models;
  std::set<std::string> names;
  for (const json& mj : *list) {
    ModelSpec m;
    if (auto s = ParseModel(mj, origin, m); !s.ok()) return s;
    if (!names.insert(m.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(origin, ": model '", m.name, "' is listed twice"));
    }
    models.push_back(std::move(m));
  }
  return std::unique_ptr<ModelCatalogue>(new ModelCatalogue(std::move(models), std::move(models_dir)));
}

absl::StatusOr<const ModelSpec*> ModelCatalogue::Get(std::string_view name) const {
  std::vector<std::string> known;
  for (const ModelSpec& m : models_) {
    if (m.name == name) return &m;
    known.push_back(m.name);
  }
  return absl::NotFoundError(absl::StrCat("no model '", std::string(name), "' in the catalogue (known: ",
                                          absl::StrJoin(known, ", "), ")"));
}

std::filesystem::path ModelCatalogue::PathOf(const ModelFile& file) const {
  return models_dir_ / file.path;
}

absl::Status ModelCatalogue::Verify(std::string_view name_view) const {
  const std::string name(name_view);
  ASSIGN_OR_RETURN(const ModelSpec* spec, Get(name));
  for (const ModelFile& f : spec->files) {
    const std::filesystem::path path = PathOf(f);
    std::error_code ec;
    const uintmax_t size = std::filesystem::file_size(path, ec);
    if (ec) {
      return absl::NotFoundError(absl::StrCat("model '", name, "': file ", path.string(),
                                              " is missing; ", RestoreHint(models_dir_)));
    }
    if (size != f.file_bytes) {
      return absl::DataLossError(absl::StrCat("model '", name, "': file ", path.string(), " has ",
                                              size, " bytes, expected ", f.file_bytes, "; ",
                                              RestoreHint(models_dir_)));
    }
    ASSIGN_OR_RETURN(std::string sha, Sha256OfFile(path));
    if (sha != f.sha256) {
      return absl::DataLossError(absl::StrCat("model '", name, "': file ", path.string(),
                                              " is corrupt (sha256 ", sha, ", expected ", f.sha256,
                                              "); ", RestoreHint(models_dir_)));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Sha256OfFile(const std::filesystem::path& path) {
  std::FILE* fp = std::fopen(path.c_str(), "rb");
  if (fp == nullptr) return absl::NotFoundError(absl::StrCat(path.string(), " cannot be opened"));
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::array<unsigned char, 1 << 16> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), fp)) > 0) EVP_DigestUpdate(ctx.get(), buf.data(), n);
  const bool failed = std::ferror(fp) != 0;
  std::fclose(fp);
  if (failed) return absl::DataLossError(absl::StrCat("read error on ", path.string()));
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 15]);
  }
  return hex;
}

}  // namespace fusion::models
