#include "bench/peers/fusiond_nets.h"

#include <ATen/ATen.h>

#include <opencv2/imgproc.hpp>

#include "absl/strings/str_cat.h"
#include "models/faceapi/face_landmark_68.h"
#include "models/faceapi/face_recognition.h"
#include "models/faceapi/image.h"
#include "models/faceapi/ssd_mobilenet_v1.h"
#include "models/faceapi/tiny_face_detector.h"
#include "models/keras/enhancer.h"
#include "models/tfjs/weights.h"

namespace fusion::peers {
namespace {

namespace fs = std::filesystem;

// The astronaut's face in the 512x512 photo (shared/reference/upscaler_ref.py's region).
const cv::Rect kFaceRegion(150, 60, 128, 128);

absl::StatusOr<tfjs::WeightMap> FaceApiWeights(const fs::path& models_dir, const std::string& model) {
  return tfjs::LoadWeights(models_dir / "face-api" / (model + "-weights_manifest.json"));
}

at::Tensor Flat(const at::Tensor& t) { return t.contiguous().view({-1}); }

template <typename Net>
FusiondNet Wrap(std::string id, at::Tensor input, std::unique_ptr<Net> net,
                std::function<at::Tensor(const Net&, const at::Tensor&)> fwd) {
  std::shared_ptr<Net> shared(std::move(net));
  FusiondNet out{std::move(id), std::move(input), nullptr, shared};
  out.forward = [shared, fwd](const at::Tensor& x) { return fwd(*shared, x); };
  return out;
}

absl::StatusOr<FusiondNet> MakeEsrgan(const std::string& id, const std::string& family, int scale,
                                      const fs::path& models_dir, const cv::Mat& rgb) {
  auto model = keras::KerasModel::Load(models_dir / family / absl::StrCat("x", scale) / "model.json");
  if (!model.ok()) return model.status();
  auto enhancer = keras::Enhancer::Create(std::move(*model), {});
  if (!enhancer.ok()) return enhancer.status();
  cv::Mat small;
  cv::resize(rgb(kFaceRegion), small, cv::Size(64, 64), 0, 0, cv::INTER_AREA);
  const at::Tensor x = faceapi::ToBatchTensor(small, 64, /*center=*/false) / 255.0;
  return Wrap<keras::Enhancer>(id, x, std::move(*enhancer), [id](const keras::Enhancer& e, const at::Tensor& in) {
    absl::StatusOr<at::Tensor> y = e.Run(in);
    if (!y.ok()) throw std::runtime_error(absl::StrCat(id, ": ", y.status().ToString()));
    return Flat(*y);
  });
}

}  // namespace

const std::vector<std::string>& NetIds() {
  static const std::vector<std::string> ids = {
      "tiny_face_detector_416", "face_recognition_150", "face_landmark_68_112", "ssd_mobilenetv1_512",
      "esrgan_slim_x2_64",      "esrgan_slim_x4_64",    "esrgan_medium_x2_64",  "esrgan_medium_x4_64"};
  return ids;
}

absl::StatusOr<FusiondNet> MakeFusiondNet(const std::string& id, const fs::path& models_dir, const fs::path& image) {
  absl::StatusOr<cv::Mat> rgb = faceapi::LoadRgb(image);
  if (!rgb.ok()) return rgb.status();
  if (rgb->cols < kFaceRegion.br().x || rgb->rows < kFaceRegion.br().y) {
    return absl::InvalidArgumentError(absl::StrCat(image.string(), " is smaller than the face region"));
  }
  const cv::Mat face = (*rgb)(kFaceRegion);
  using namespace faceapi;
  if (id == "tiny_face_detector_416") {
    auto w = FaceApiWeights(models_dir, "tiny_face_detector_model");
    if (!w.ok()) return w.status();
    auto net = TinyFaceDetector::Create(*w, {});
    if (!net.ok()) return net.status();
    return Wrap<TinyFaceDetector>(id, ToBatchTensor(*rgb, 416, false), std::move(*net),
                                  [](const TinyFaceDetector& n, const at::Tensor& x) { return Flat(n.Forward(x)); });
  }
  if (id == "ssd_mobilenetv1_512") {
    auto w = FaceApiWeights(models_dir, "ssd_mobilenetv1_model");
    if (!w.ok()) return w.status();
    auto net = SsdMobilenetV1::Create(*w, {});
    if (!net.ok()) return net.status();
    return Wrap<SsdMobilenetV1>(id, ToBatchTensor(*rgb, 512, false), std::move(*net),
                                [](const SsdMobilenetV1& n, const at::Tensor& x) {
                                  auto [boxes, scores] = n.Forward(x);
                                  return at::cat({Flat(boxes), Flat(scores)});
                                });
  }
  if (id == "face_landmark_68_112") {
    auto w = FaceApiWeights(models_dir, "face_landmark_68_model");
    if (!w.ok()) return w.status();
    auto net = FaceLandmark68Net::Create(*w);
    if (!net.ok()) return net.status();
    return Wrap<FaceLandmark68Net>(id, ToBatchTensor(face, 112, true), std::move(*net),
                                   [](const FaceLandmark68Net& n, const at::Tensor& x) { return Flat(n.Forward(x)); });
  }
  if (id == "face_recognition_150") {
    auto w = FaceApiWeights(models_dir, "face_recognition_model");
    if (!w.ok()) return w.status();
    auto net = FaceRecognitionNet::Create(*w);
    if (!net.ok()) return net.status();
    return Wrap<FaceRecognitionNet>(id, ToBatchTensor(face, 150, true), std::move(*net),
                                    [](const FaceRecognitionNet& n, const at::Tensor& x) { return Flat(n.Forward(x)); });
  }
  for (const char* family : {"slim", "medium"}) {
    for (int scale : {2, 4}) {
      if (id == absl::StrCat("esrgan_", family, "_x", scale, "_64")) {
        return MakeEsrgan(id, absl::StrCat("esrgan-", family), scale, models_dir, *rgb);
      }
    }
  }
  return absl::NotFoundError(absl::StrCat("peer bench: unknown network id '", id, "'"));
}

}  // namespace fusion::peers
