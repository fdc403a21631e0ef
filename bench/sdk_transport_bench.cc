// sdk_transport_bench: what the C++ SDK's image transport costs against a running fusiond, the
// C++ side of bench/python_sdk_overhead.py (which runs the same three steps through the Python
// SDK and prints both). Not a test.
//
//   put             PutMemfd of --put FILE: sealed memfd + SCM_RIGHTS over <socket>.fd + reply
//   result memfd    GetJobResult of --memfd-job (a result over the daemon's 4 MiB inline limit):
//                   the RPC, the daemon's Publish, GetMemfd (map and copy)
//   result inline   GetJobResult of --inline-job (a small result, inline in the gRPC reply)
//
// Each line: step, bytes, median and max of --iterations runs in ms. Every put and every memfd
// result leaves a token in the daemon for its TTL (10 min; 64 per uid): keep iterations small.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "fusion/client.h"
#include "memfd_transfer.h"
#include "bench/read_file.h"

namespace {

using fusion::bench::ReadFile;

// Runs `step` n times (after one warm-up run); prints the median and max wall time in ms.
// `step` returns the bytes it moved, 0 on error.
bool Measure(const char* name, int n, const std::function<size_t()>& step) {
  if (step() == 0) return false;
  std::vector<double> ms;
  size_t bytes = 0;
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    bytes = step();
    if (bytes == 0) return false;
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("%-14s %10zu bytes  median %8.3f ms  max %8.3f ms\n", name, bytes, ms[ms.size() / 2], ms.back());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"sdk_transport_bench: the C++ SDK's image transport against a running fusiond"};
  std::string socket, put_path, memfd_job, inline_job;
  int n = 10;
  app.add_option("--socket", socket, "fusiond socket")->required();
  app.add_option("--put", put_path, "image to put by memfd (the mosaic)")->required();
  app.add_option("--memfd-job", memfd_job, "SUCCEEDED job whose result comes by memfd")->required();
  app.add_option("--inline-job", inline_job, "SUCCEEDED job whose result comes inline")->required();
  app.add_option("--iterations", n, "runs per figure")->check(CLI::Range(1, 20));
  CLI11_PARSE(app, argc, argv);
  const std::string image = ReadFile(put_path);
  if (image.empty()) {
    std::fprintf(stderr, "cannot read --put\n");
    return 2;
  }
  auto client = fusion::Client::Connect({.socket = socket, .timeout_ms = 60000});
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 2;
  }
  const std::string path = socket.rfind("unix://", 0) == 0 ? socket.substr(7) : socket;
  auto fail = [](const absl::Status& st) {
    std::fprintf(stderr, "%s\n", st.ToString().c_str());
    return size_t{0};
  };
  bool ok = Measure("put", n, [&] {
    auto token = fusion::internal::PutMemfd(path, image);
    return token.ok() ? image.size() : fail(token.status());
  });
  ok = ok && Measure("result memfd", n, [&] {
    auto r = (*client)->GetJobResult(memfd_job);
    if (!r.ok()) return fail(r.status());
    return r->image_by_memfd ? r->image.size() : fail(absl::InternalError("result came inline"));
  });
  ok = ok && Measure("result inline", n, [&] {
    auto r = (*client)->GetJobResult(inline_job);
    if (!r.ok()) return fail(r.status());
    return r->image_by_memfd ? fail(absl::InternalError("result came by memfd")) : r->image.size();
  });
  return ok ? 0 : 1;
}
