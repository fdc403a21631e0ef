// The face-fusion generator stage: puts the source face into the target face's geometry.
//
// Tensor contract (shared by the classical generator and any TorchScript generator registered in
// the model catalogue, so either can serve the stage):
//   source, target           [1,3,S,S] float32, RGB, range [0,1], NCHW, contiguous, same device.
//                            S = crop side in pixels (any S >= 32; the pipeline uses kCropSize).
//                            Each is an aligned face crop (see face_crop.h: AlignFaceCrop).
//   source_landmarks,        [1,68,2] float32 on any device: the 68 iBUG-300W/dlib points
//   target_landmarks         (0-16 jaw, 17-26 brows, 27-35 nose, 36-47 eyes, 48-67 mouth) as (x,y)
//                            in pixels of their own crop; pixel centres are integers (OpenCV frame),
//                            so the crop spans [-0.5, S-0.5].
//   ratio                    double in [0,1]: 0 returns the target unchanged (bit-exact for the
//                            classical generator), 1 the full source identity.
//   output                   [1,3,S,S] float32 RGB [0,1] on the inputs' device: the target crop
//                            with the (colour-matched) source face; the blend stage pastes
//                            output - target back into the frame (blend.h).
// A TorchScript generator provides `forward(source, source_landmarks, target, target_landmarks,
// ratio: float) -> Tensor` with this contract; its output is checked against it.
//
// Thread-safety: Fuse() is const and may be called from several threads at once.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <vector>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace fusion::models {

inline constexpr int kCropSize = 256;   // pixels, the pipeline's default crop side S
inline constexpr int kMinCropSize = 32;  // pixels
inline constexpr int kNumLandmarks = 68;

struct GeneratorInputs {
  at::Tensor source;            // [1,3,S,S] float32 RGB [0,1]
  at::Tensor source_landmarks;  // [1,68,2] float32, source-crop pixels
  at::Tensor target;            // [1,3,S,S] float32 RGB [0,1]
  at::Tensor target_landmarks;  // [1,68,2] float32, target-crop pixels
  double ratio = 1.0;           // [0,1]
};

// Returns InvalidArgument naming the tensor and its shape/dtype when `in` breaks the contract.
absl::Status ValidateGeneratorInputs(const GeneratorInputs& in);

// Returns Internal naming `generator` when `out` is not [1,3,S,S] float32 on the target's device.
absl::Status ValidateGeneratorOutput(std::string_view generator, const GeneratorInputs& in,
                                     const at::Tensor& out);

class FusionGenerator {
 public:
  virtual ~FusionGenerator() = default;
  // Errors: InvalidArgument for inputs that break the contract; Internal for a failed run
  // (message names the generator and the LibTorch error).
  virtual absl::StatusOr<at::Tensor> Fuse(const GeneratorInputs& in) const = 0;
  virtual std::string name() const = 0;
  // Moves the generator's weights to `device` ("cpu", "cuda:N") for a device copy (ModelStore's
  // upload); generators without weights of their own keep the default (nothing to move).
  // Errors: Internal naming the generator and the device. Not thread-safe with Fuse().
  virtual absl::Status MoveTo(const std::string& device) { return absl::OkStatus(); }
  // What this generator cannot take from the source face with these landmarks ([1,68,2] float32,
  // source-crop pixels, as GeneratorInputs::source_landmarks): one sentence per limitation, for
  // the job's degradations. Empty when the source is fully usable (the default).
  virtual std::vector<std::string> SourceNotes(const at::Tensor& source_landmarks) const { return {}; }
};

}  // namespace fusion::models
