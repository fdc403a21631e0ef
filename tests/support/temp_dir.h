// A temporary directory removed (recursively) at destruction. Test-only.
#pragma once

#include <string>

namespace fusion::testing {

class TempDir {
 public:
  // Created under $TMPDIR or /tmp with mode 0755 (so other test uids can reach sockets in it).
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace fusion::testing
