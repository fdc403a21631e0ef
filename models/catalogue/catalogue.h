// ModelCatalogue: fusiond's list of stage models, read from models/manifest.json, and the
// integrity check of their files under the models directory.
//
// A catalogue entry (ModelSpec) says what a model is (name, stage, format), which files it
// needs (path relative to the models directory, sha256, size in bytes, and the npm tarball and
// member it is fetched from), and what the residency manager needs before it has measured
// anything: device_bytes (fp32 parameters + buffers), a working-set prior in bytes per pixel of
// the network input, default precision, pinned-by-default, one-shot and tileable flags. The
// files are fetched and verified by scripts/fetch-models.sh, which reads the same manifest.
//
// Errors: Create() gives INVALID_ARGUMENT naming the manifest and the model/key that is wrong;
// Get() NOT_FOUND for an unknown name; Verify() NOT_FOUND for a missing file and DATA_LOSS for a
// file whose size or sha256 differs, both naming the file and the command that restores it.
//
// Invariant: immutable after Create() (names unique, every hash 64 lowercase hex digits).
// Thread-safety: all methods are const and safe to call from any thread.
// This library does not link LibTorch.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace fusion::models {

// The command that fetches and repairs model files; quoted in every file error.
inline constexpr char kFetchCommand[] = "scripts/fetch-models.sh";

struct ModelFile {
  std::string path;     // relative to the models directory, e.g. "face-api/tiny_face_detector_model.bin"
  std::string sha256;   // 64 lowercase hex digits
  uint64_t file_bytes = 0;
  std::string package;  // npm tarball it comes from, e.g. "vladmandic-face-api-1.7.15.tgz"
  std::string member;   // path inside the tarball
};

struct ModelSpec {
  std::string name;    // unique key, e.g. "tiny_face_detector"
  std::string stage;   // detect | landmarks | encode | generate | enhance | blend
  std::string format;  // tfjs-weights | keras-layers-model | torchscript | builtin
  std::vector<ModelFile> files;  // may be empty for a model without weights (builtin)
  uint64_t device_bytes = 0;     // fp32 parameters + buffers, bytes
  uint64_t working_set_bytes_per_pixel = 0;  // activation prior, bytes per input pixel
  std::string default_precision = "fp32";    // on the CPU device: fp32 | bf16 (loader/precision.h)
  std::string cuda_precision = "fp32";       // on CUDA devices: fp32 | fp16 (autocast)
  // The largest max-abs output difference from fp32 (the network's output units, 0..255 for
  // ESRGAN) a reduced precision may make on the probe (loader/precision.h); required > 0 when
  // either precision above is reduced. Reduced precisions apply to keras-layers-model (enhance).
  double reduced_precision_tolerance = 0;
  bool pinned_by_default = false;
  bool one_shot = false;  // released right after use under memory pressure (DESIGN §3)
  bool tileable = false;  // may run on tiles (DESIGN §4 step 3)
  // How long the model may stay on the device unused before it drops to the host tier
  // (docs/MEMORY.md#keep-alive): the manifest's optional "keep_alive", an absl duration string
  // ("90s", "10m", "0") or "forever" (absl::InfiniteDuration()). Absent = the daemon's keep_alive.
  std::optional<absl::Duration> keep_alive;
  std::string input;      // human-readable input contract (shape, dtype, range, RGB/BGR)
  std::string license;
  std::string source;

  uint64_t TotalFileBytes() const;
};

class ModelCatalogue {
 public:
  struct Options {
    // The catalogue JSON (models/manifest.json in the source tree).
    std::filesystem::path manifest;
    // Where the files live (fusiond's --models-dir; build/fetched/models in a checkout).
    std::filesystem::path models_dir;
  };

  static absl::StatusOr<std::unique_ptr<ModelCatalogue>> Create(const Options& options);
  // Same, from JSON text; `origin` names the document in errors.
  static absl::StatusOr<std::unique_ptr<ModelCatalogue>> FromJson(
      std::string_view json_text, std::string_view origin, std::filesystem::path models_dir);

  const std::vector<ModelSpec>& models() const { return models_; }
  const std::filesystem::path& models_dir() const { return models_dir_; }

  // The entry named `name`, or NOT_FOUND listing the known names.
  absl::StatusOr<const ModelSpec*> Get(std::string_view name) const;

  // Absolute path of `file` under the models directory.
  std::filesystem::path PathOf(const ModelFile& file) const;

  // Checks every file of model `name`: present, file_bytes and sha256 as catalogued.
  // Reads each file once (about 1 GB/s). NOT_FOUND / DATA_LOSS as described above.
  absl::Status Verify(std::string_view name) const;

 private:
  ModelCatalogue(std::vector<ModelSpec> models, std::filesystem::path models_dir)
      : models_(std::move(models)), models_dir_(std::move(models_dir)) {}

  const std::vector<ModelSpec> models_;
  const std::filesystem::path models_dir_;
};

// sha256 of a file as 64 lowercase hex digits (OpenSSL libcrypto). NOT_FOUND if it cannot be
// opened, DATA_LOSS on a read error.
absl::StatusOr<std::string> Sha256OfFile(const std::filesystem::path& path);

}  // namespace fusion::models
