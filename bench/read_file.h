// The whole of a file as bytes, for the benchmarks' inputs (photos, weights); empty when it
// cannot be read (the callers check the size or the decode). Thread-safe.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace fusion::bench {

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace fusion::bench
