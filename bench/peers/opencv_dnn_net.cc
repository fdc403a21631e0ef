#include "bench/peers/opencv_dnn_net.h"

#include <ATen/ATen.h>

#include <opencv2/dnn.hpp>

#include "absl/strings/str_cat.h"

namespace fusion::peers {

struct OpenCvDnnNet::Impl {
  cv::dnn::Net net;
};

OpenCvDnnNet::OpenCvDnnNet(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
OpenCvDnnNet::~OpenCvDnnNet() = default;

absl::StatusOr<std::unique_ptr<OpenCvDnnNet>> OpenCvDnnNet::Load(const std::filesystem::path& onnx) {
  auto impl = std::make_unique<Impl>();
  try {
    impl->net = cv::dnn::readNetFromONNX(onnx.string());
  } catch (const cv::Exception& e) {
    return absl::InternalError(absl::StrCat("OpenCV dnn cannot import ", onnx.string(), ": ", e.what()));
  }
  if (impl->net.empty()) return absl::InternalError(absl::StrCat("OpenCV dnn: empty net from ", onnx.string()));
  impl->net.setPreferableBackend(cv::dnn::DNN_BACKEND_OPENCV);
  impl->net.setPreferableTarget(cv::dnn::DNN_TARGET_CPU);
  return std::unique_ptr<OpenCvDnnNet>(new OpenCvDnnNet(std::move(impl)));
}

at::Tensor OpenCvDnnNet::Forward(const at::Tensor& x) {
  const at::Tensor in = x.contiguous();
  std::vector<int> shape(in.sizes().begin(), in.sizes().end());
  // The blob aliases the tensor; setInput copies it into the net.
  const cv::Mat blob(static_cast<int>(shape.size()), shape.data(), CV_32F, in.data_ptr<float>());
  impl_->net.setInput(blob);
  cv::Mat out = impl_->net.forward();
  if (!out.isContinuous()) out = out.clone();
  return at::from_blob(out.ptr<float>(), {static_cast<int64_t>(out.total())}, at::kFloat).clone();
}

}  // namespace fusion::peers
