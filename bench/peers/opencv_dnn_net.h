// An ONNX network run by OpenCV dnn (cv::dnn::readNetFromONNX, DNN_BACKEND_OPENCV on the CPU),
// fed and read as at::Tensors so the peer benchmark compares it with fusiond's own forward.
// Input: NCHW fp32 (the ONNX graph's single input); output: the single output, flattened.
// Threads: cv::setNumThreads (Debian's OpenCV 4.6 uses TBB), set by the caller.
// Thread-safety: none (cv::dnn::Net::forward mutates the net).
#pragma once

#include <ATen/core/Tensor.h>

#include <filesystem>
#include <memory>

#include "absl/status/statusor.h"

namespace fusion::peers {

class OpenCvDnnNet {
 public:
  // INTERNAL with OpenCV's message when the importer refuses the graph.
  static absl::StatusOr<std::unique_ptr<OpenCvDnnNet>> Load(const std::filesystem::path& onnx);
  ~OpenCvDnnNet();
  // x [N,C,H,W] fp32 CPU -> flat fp32. Throws cv::Exception on a failing layer.
  at::Tensor Forward(const at::Tensor& x);

 private:
  struct Impl;  // holds the cv::dnn::Net (opencv_dnn_net.cc)
  explicit OpenCvDnnNet(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fusion::peers
