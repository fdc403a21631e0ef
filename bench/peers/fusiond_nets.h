// The networks of the peer benchmark (bench/peers) as fusiond runs them: each made through its
// public header (models/faceapi/*.h, models/keras/enhancer.h: Create + Forward / Run), so the
// benchmark measures whatever those become. One input per network, cut from the committed astronaut
// photo, and one output: the network's outputs flattened and concatenated (SSD: boxes then scores),
// so an ONNX export with a single output can be compared value for value.
//
// Ids and inputs (NCHW fp32, RGB):
//   tiny_face_detector_416  [1,3,416,416] 0..255  whole image (ToBatchTensor, pad bottom/right)
//   ssd_mobilenetv1_512     [1,3,512,512] 0..255  whole image
//   face_landmark_68_112    [1,3,112,112] 0..255  face region (ToBatchTensor, centred)
//   face_recognition_150    [1,3,150,150] 0..255  face region
//   esrgan_{slim,medium}_x{2,4}_64  [1,3,64,64] 0..1  face region resized (INTER_AREA); the
//                           Enhancer stage (x255 -> model -> /255, clamp 0..1)
// Thread-safety: Forward is const and may run concurrently (the networks' own guarantee).
#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace fusion::peers {

struct FusiondNet {
  std::string id;
  at::Tensor input;                                           // the benchmark's input, CPU fp32
  std::function<at::Tensor(const at::Tensor&)> forward;       // -> flat [numel] fp32
  std::shared_ptr<void> owner;                                // keeps the network alive
};

// Every id this file knows, in the table's order.
const std::vector<std::string>& NetIds();

// Loads network `id` from models_dir (face-api/, esrgan-slim/, esrgan-medium/ as fetched) and
// builds its input from `image` (RGB photo). NOT_FOUND for an unknown id or a missing file;
// the networks' own errors otherwise.
absl::StatusOr<FusiondNet> MakeFusiondNet(const std::string& id, const std::filesystem::path& models_dir,
                                          const std::filesystem::path& image);

}  // namespace fusion::peers
