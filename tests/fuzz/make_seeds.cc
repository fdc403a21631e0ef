// fuzz_seeds OUT_DIR: writes the generated seed corpus of every fuzz target to
// OUT_DIR/<target>/ (docs/FUZZING.md). Nothing third-party: images come from the in-tree test
// face and tests/image/hostile_corpus.h, the rest is written here.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "fd_protocol.h"
#include "fusion/v1/fusion.pb.h"
#include "hostile_corpus.h"

namespace fs = std::filesystem;
using namespace fusion;

namespace {

fs::path out_dir;

void Write(const std::string& target, const std::string& name, const std::string& bytes) {
  const fs::path dir = out_dir / target;
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

std::string Encode(const cv::Mat& m, const std::string& ext, std::vector<int> params = {}) {
  std::vector<uchar> buf;
  if (!cv::imencode(ext, m, buf, params)) {
    std::cerr << "fuzz_seeds: cannot encode " << ext << "\n";
    std::exit(1);
  }
  return std::string(buf.begin(), buf.end());
}

// Small images of every accepted format and layout: a fuzzer mutates them fastest.
std::vector<std::pair<std::string, std::string>> SmallImages(const cv::Mat& face) {
  cv::Mat small, grey, bgra, deep;
  cv::resize(face, small, {48, 40}, 0, 0, cv::INTER_AREA);
  cv::cvtColor(small, grey, cv::COLOR_BGR2GRAY);
  cv::cvtColor(small, bgra, cv::COLOR_BGR2BGRA);
  small.convertTo(deep, CV_16UC3, 257);
  return {
      {"small.png", Encode(small, ".png")},
      {"small_grey.png", Encode(grey, ".png")},
      {"small_bgra.png", Encode(bgra, ".png")},
      {"small_16bit.png", Encode(deep, ".png")},
      {"small.jpg", Encode(small, ".jpg", {cv::IMWRITE_JPEG_QUALITY, 80})},
      {"small_progressive.jpg", Encode(small, ".jpg", {cv::IMWRITE_JPEG_PROGRESSIVE, 1})},
      {"small_grey.jpg", Encode(grey, ".jpg")},
      {"small.webp", Encode(small, ".webp", {cv::IMWRITE_WEBP_QUALITY, 60})},
      {"small_lossless.webp", Encode(bgra, ".webp", {cv::IMWRITE_WEBP_QUALITY, 101})},
      {"small.tiff", Encode(small, ".tiff")},
      {"small_16bit.tiff", Encode(deep, ".tiff")},
      {"small.bmp", Encode(small, ".bmp")},
      {"small_grey.bmp", Encode(grey, ".bmp")},
  };
}

void ImageSeeds(const cv::Mat& face) {
  for (const auto& [name, bytes] : SmallImages(face)) Write("image_fuzzer", name, bytes);
  // The hostile corpus, but not its decompression bombs' megabytes of zlib data (libFuzzer
  // truncates inputs past -max_len anyway; the header-only bombs stay).
  for (const testing::HostileInput& h : testing::MakeHostileCorpus(face)) {
    if (h.bytes.size() <= 256 * 1024) Write("image_fuzzer", "hostile_" + h.name, h.bytes);
  }
}

void RpcSeeds(const cv::Mat& face) {
  auto write = [](const std::string& name, int which, const google::protobuf::Message& m) {
    Write("rpc_request_fuzzer", name, std::string(1, static_cast<char>(which)) + m.SerializeAsString());
  };
  cv::Mat small;
  cv::resize(face, small, {32, 32}, 0, 0, cv::INTER_AREA);
  const std::string png = Encode(small, ".png"), jpg = Encode(small, ".jpg");
  v1::SubmitJobRequest submit;
  submit.mutable_source()->set_inline_bytes(jpg);
  submit.mutable_target()->set_inline_bytes(png);
  write("submit_minimal", 0, submit);
  v1::JobOptions* o = submit.mutable_options();
  o->set_ratio(0.5);
  o->set_enhance_scale(2);
  o->set_upscale(4);
  o->set_enhance_model("esrgan-slim-x2");
  o->set_max_side(1024);
  o->set_min_face_px(40);
  o->set_min_face_score(0.5);
  o->set_format(v1::OutputFormat_MAX);
  o->set_priority(v1::HIGH);
  write("submit_options", 0, submit);
  o->set_faces(v1::REFERENCE);
  o->mutable_reference()->set_inline_bytes(png);
  o->set_reference_max_distance(0.6);
  write("submit_reference", 0, submit);
  v1::ListJobsRequest list;
  list.add_states(v1::QUEUED);
  list.add_states(v1::SUCCEEDED);
  list.set_limit(10);
  write("list_jobs", 1, list);
  v1::GetJobRequest get;
  get.set_job_id("0123456789abcdef");
  write("get_job", 2, get);
  v1::WatchJobRequest watch;
  watch.set_job_id("job-1");
  write("watch_job", 3, watch);
  v1::CancelJobRequest cancel;
  cancel.set_job_id("'; DROP TABLE jobs; --");
  write("cancel_job", 4, cancel);
  v1::GetJobResultRequest result;
  result.set_job_id("job-1");
  result.set_prefer_memfd(true);
  write("get_job_result", 5, result);
  v1::ModelRequest model;
  model.set_name("face_recognition");
  write("model_request", 6, model);
  v1::WatchMemoryRequest memory;
  memory.set_interval_ms(50);
  write("watch_memory", 7, memory);
}

void TfjsSeeds() {
  Write("tfjs_manifest_fuzzer", "groups.json", R"([
 {"paths": ["shard1", "shard2"],
  "weights": [
   {"name": "conv0/filters", "shape": [3, 3, 3, 32], "dtype": "float32"},
   {"name": "conv0/bias", "shape": [32], "dtype": "float32",
    "quantization": {"dtype": "uint8", "scale": 0.0039, "min": -0.5}},
   {"name": "fc/weights", "shape": [128, 10], "dtype": "float32",
    "quantization": {"dtype": "uint16", "scale": 1e-5, "min": -0.3}},
   {"name": "half", "shape": [4, 4], "dtype": "float32", "quantization": {"dtype": "float16"}},
   {"name": "shape_const", "shape": [4], "dtype": "int32"}]},
 {"paths": ["shard3"], "weights": [{"name": "scalar", "shape": [], "dtype": "float32"}]}
])");
  Write("tfjs_manifest_fuzzer", "model.json", R"({"format": "layers-model",
 "modelTopology": {"class_name": "Model", "config": {"layers": []}},
 "weightsManifest": [{"paths": ["group1-shard1of1.bin"],
  "weights": [{"name": "conv2d/kernel", "shape": [3, 3, 3, 64], "dtype": "float32"},
              {"name": "conv2d/bias", "shape": [64], "dtype": "float32"}]}]})");
  Write("tfjs_manifest_fuzzer", "empty.json", "[]");
}

void KerasSeeds() {
  // Every layer type keras_topology.h accepts, wired as ESRGAN's blocks are.
  Write("keras_topology_fuzzer", "every_layer.json", R"({"format": "layers-model",
 "modelTopology": {"model_config": {"class_name": "Functional", "config": {"layers": [
  {"class_name": "InputLayer", "name": "in", "config": {"batch_input_shape": [null, null, null, 3]},
   "inbound_nodes": []},
  {"class_name": "Conv2D", "name": "c1", "config": {"filters": 8, "kernel_size": [3, 3],
   "strides": [1, 1], "padding": "same", "activation": "relu", "use_bias": true,
   "dilation_rate": [1, 1], "groups": 1}, "inbound_nodes": [[["in", 0, 0, {}]]]},
  {"class_name": "Conv2D", "name": "c2", "config": {"filters": 8, "kernel_size": [1, 1],
   "strides": [1, 1], "padding": "valid", "use_bias": false}, "inbound_nodes": [[["c1", 0, 0, {}]]]},
  {"class_name": "Activation", "name": "r", "config": {"activation": "relu"},
   "inbound_nodes": [[["c2", 0, 0, {}]]]},
  {"class_name": "Concatenate", "name": "cat", "config": {"axis": -1},
   "inbound_nodes": [[["c1", 0, 0, {}], ["r", 0, 0, {}]]]},
  {"class_name": "MultiplyBeta", "name": "beta", "config": {}, "inbound_nodes": [[["cat", 0, 0, {}]]]},
  {"class_name": "Add", "name": "add", "config": {}, "inbound_nodes": [[["beta", 0, 0, {}], ["cat", 0, 0, {}]]]},
  {"class_name": "UpSampling2D", "name": "up", "config": {"size": [2, 2], "interpolation": "nearest"},
   "inbound_nodes": [[["add", 0, 0, {}]]]},
  {"class_name": "PixelShuffle2x", "name": "out", "config": {"scale": 2},
   "inbound_nodes": [[["up", 0, 0, {}]]]}],
  "input_layers": [["in", 0, 0]], "output_layers": [["out", 0, 0]]}}},
 "weightsManifest": []})");
  Write("keras_topology_fuzzer", "strided.json", R"({"modelTopology": {"model_config": {"config": {
 "layers": [{"class_name": "InputLayer", "name": "in", "config": {"batch_input_shape": [1, 64, 64, 4]},
  "inbound_nodes": []},
 {"class_name": "Conv2D", "name": "out", "config": {"filters": 4, "kernel_size": [5, 5],
  "strides": [2, 2], "padding": "same"}, "inbound_nodes": [[["in", 0, 0, {}]]]}],
 "output_layers": [["out", 0, 0]]}}}})");
}

void ConfigSeeds() {
  Write("config_fuzzer", "full.toml", R"(# every key fusiond reads (config.h)
socket = "/run/fusiond/fusiond.sock"
device = "cuda:0"
device_memory_limit = "6GiB"
host_memory_limit = 8589934592
device_memory_reserve = "512MiB"
max_message_bytes = "32MiB"
models_dir = "/var/lib/fusiond/models"
manifest = "/usr/share/fusiond/manifest.json"
state_dir = "/var/lib/fusiond"
socket_group = "fusion"
log_level = "info"
allowed_uids = [1000, 1001]
admin_uids = [0]
admin_group = "fusion-admin"
max_connections_per_uid = 64
max_connections = 512
fd_max_connections_per_uid = 8
fd_max_connections = 64
max_queued_jobs_per_uid = 64
max_watch_streams_per_uid = 128
grpc_memory_quota = "256MiB"
pin_models = ["face_recognition", "classical-fusion"]
one_shot_min_free = "1.5GB"
one_shot_pressure = 0.85
keep_alive = "forever"
eviction_policy = "planner"
result_retention_bytes = "1GiB"
result_retention = "24h"
max_pixels = 100000000
max_concurrent_jobs = 2
stalled_connection_timeout_ms = 15000
min_face_px = 40
min_face_score = 0.5
drain_ms = 5000
)");
  Write("config_fuzzer", "minimal.toml", "device = \"cpu\"\n");
  Write("config_fuzzer", "tables.toml", "[section]\nkey = 1\n[[array]]\nx = 2021-01-01T00:00:00Z\n");
}

void FdSeeds() {
  Write("fd_protocol_fuzzer", "put_sealed", std::string("\x01") + "PUT\n");
  Write("fd_protocol_fuzzer", "put_unsealed", std::string("\x02") + "PUT\n");
  Write("fd_protocol_fuzzer", "put_pipe", std::string("\x04") + "PUT\n");
  Write("fd_protocol_fuzzer", "put_two_fds", std::string("\x09") + "PUT\n");
  Write("fd_protocol_fuzzer", "put_without_fd", std::string("\x00", 1) + "PUT\n");
  Write("fd_protocol_fuzzer", "get_owned", std::string("\x10") + "GET %T\n");
  Write("fd_protocol_fuzzer", "get_unknown", std::string("\x00", 1) + "GET 0123456789abcdef0123456789abcdef\n");
  Write("fd_protocol_fuzzer", "get_with_fd", std::string("\x11") + "GET %T\n");
  Write("fd_protocol_fuzzer", "too_long", std::string("\x00", 1) + std::string(300, 'A') + "\n");
  Write("fd_protocol_fuzzer", "no_newline", std::string("\x01") + "PUT");
  Write("fd_protocol_fuzzer", "unknown", std::string("\x00", 1) + "DELETE x\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_seeds OUT_DIR\n";
    return 2;
  }
  out_dir = argv[1];
  const cv::Mat face = cv::imread(FUSION_TEST_DATA_DIR "/faces/grace_hopper_512x600.jpg");
  if (face.empty()) {
    std::cerr << "fuzz_seeds: cannot read the test face under " FUSION_TEST_DATA_DIR "\n";
    return 1;
  }
  ImageSeeds(face);
  RpcSeeds(face);
  TfjsSeeds();
  KerasSeeds();
  ConfigSeeds();
  FdSeeds();
  return 0;
}
