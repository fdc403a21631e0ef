// The no-LibTorch model-file parsers (tfjs/weights_manifest.h, keras/keras_topology.h) on
// malformed input: each case is a shape a fuzz target (tests/fuzz) produced or its fix covers.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "models/keras/keras_topology.h"
#include "models/tfjs/weights_manifest.h"

namespace fusion {
namespace {

absl::Status Manifest(const std::string& weight) {
  return tfjs::ParseManifest(R"([{"paths":["s"],"weights":[)" + weight + "]}]", "m.json").status();
}

TEST(TfjsManifest, WrongMemberTypesAreInvalidArgumentNotExceptions) {
  for (const char* w : {R"({"name":"a","shape":[1],"dtype":7})",
                        R"({"name":"a","shape":[1],"quantization":3})",
                        R"({"name":"a","shape":[1],"quantization":{"dtype":[]}})",
                        R"({"name":"a","shape":[1],"quantization":{}})"}) {
    absl::Status s = Manifest(w);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << w << ": " << s;
    EXPECT_NE(s.message().find("tensor 'a'"), std::string::npos) << s;
  }
}

TEST(TfjsManifest, SizesThatWouldOverflowAreRefused) {
  absl::Status s = Manifest(R"({"name":"big","shape":[4294967296,4294967296,4]})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("tensor 'big'"), std::string::npos) << s;
  // Each tensor fits, the group's total does not.
  s = Manifest(R"({"name":"a","shape":[4294967296]},{"name":"b","shape":[4294967296]},)"
               R"({"name":"c","shape":[4294967296]},{"name":"d","shape":[4294967296]},)"
               R"({"name":"e","shape":[4294967296]})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("group 0"), std::string::npos) << s;
  // A zero dimension is an empty tensor, not an error.
  auto ok = tfjs::ParseManifest(R"([{"paths":[],"weights":[{"name":"z","shape":[0,4294967296]}]}])", "m");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->tensors[0].bytes, 0u);
}

// A two-layer model.json around `layer`, input "in" with 4 channels (as esrgan_test.cc).
std::string TinyModel(const std::string& layer) {
  return R"({"modelTopology":{"model_config":{"class_name":"Functional","config":{"layers":[
    {"class_name":"InputLayer","name":"in","config":{"batch_input_shape":[null,null,null,4]},"inbound_nodes":[]},
    )" + layer + R"(],"input_layers":[["in",0,0]],"output_layers":[["out",0,0]]}}}})";
}

absl::Status Topology(const std::string& layer) {
  return keras::ParseTopology(TinyModel(layer), "tiny").status();
}

TEST(KerasTopology, ParsesEveryOptionItReads) {
  auto t = keras::ParseTopology(TinyModel(R"({"class_name":"Conv2D","name":"out","config":{"filters":8,)"
                                          R"("kernel_size":[3,3],"strides":[1,1],"padding":"same","activation":"relu",)"
                                          R"("use_bias":false},"inbound_nodes":[[["in",0,0,{}]]]})"),
                                "tiny");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->layers.size(), 2u);
  EXPECT_EQ(t->input_channels, 4);
  EXPECT_EQ(t->output_layer, 1);
  const keras::LayerSpec& conv = t->layers[1];
  EXPECT_EQ(conv.op, keras::Op::kConv);
  EXPECT_EQ(conv.kernel, 3);
  EXPECT_EQ(conv.filters, 8);
  EXPECT_TRUE(conv.relu);
  EXPECT_FALSE(conv.use_bias);
  EXPECT_EQ(conv.inputs, std::vector<int>{0});
  EXPECT_DOUBLE_EQ(conv.halo, 1.0);
}

// keras_topology_fuzzer: a float where an integer belongs (json::get<int> of -1.4e62 is
// undefined behaviour); and what Forward would divide by zero or overflow with.
TEST(KerasTopology, IntegersOutOfRangeAreInvalidArgument) {
  for (const char* layer : {
           R"({"class_name":"Concatenate","name":"out","config":{"axis":-144444444444444444444444444444444444444444444444444},"inbound_nodes":[[["in",0,0,{}]]]})",
           R"({"class_name":"Concatenate","name":"out","config":{"axis":3.5},"inbound_nodes":[[["in",0,0,{}]]]})",
           R"({"class_name":"Conv2D","name":"out","config":{"filters":2,"kernel_size":[3,3],"strides":[0,0],"padding":"same"},"inbound_nodes":[[["in",0,0,{}]]]})",
           R"({"class_name":"Conv2D","name":"out","config":{"filters":2,"kernel_size":[1e10,1e10],"strides":[1,1],"padding":"same"},"inbound_nodes":[[["in",0,0,{}]]]})",
           R"({"class_name":"Conv2D","name":"out","config":{"filters":0,"kernel_size":[3,3],"strides":[1,1],"padding":"same"},"inbound_nodes":[[["in",0,0,{}]]]})",
           R"({"class_name":"PixelShuffle2x","name":"out","config":{"scale":0},"inbound_nodes":[[["in",0,0,{}]]]})",
           R"({"class_name":"PixelShuffle2x","name":"out","config":{"scale":-2},"inbound_nodes":[[["in",0,0,{}]]]})",
           R"({"class_name":"UpSampling2D","name":"out","config":{"size":[100000,100000]},"inbound_nodes":[[["in",0,0,{}]]]})",
       }) {
    absl::Status s = Topology(layer);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << layer << ": " << s;
    EXPECT_NE(s.message().find("layer 'out'"), std::string::npos) << s;
  }
}

TEST(KerasTopology, AScaleThatWouldOverflowIsRefused) {
  std::string layers = R"({"class_name":"UpSampling2D","name":"u0","config":{"size":[16,16]},"inbound_nodes":[[["in",0,0,{}]]]})";
  for (int i = 1; i < 12; ++i) {
    layers += absl::StrCat(R"(,{"class_name":"UpSampling2D","name":")", i == 11 ? "out" : absl::StrCat("u", i),
                           R"(","config":{"size":[16,16]},"inbound_nodes":[[["u)", i - 1, R"(",0,0,{}]]]})");
  }
  absl::Status s = Topology(layers);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("scale exceeds"), std::string::npos) << s;
}

}  // namespace
}  // namespace fusion
