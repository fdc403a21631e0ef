// Where the models tests find their data: the fetched models directory and tier-B test photos
// (FUSION_MODELS_DIR / FUSION_TESTDATA_DIR override the build-tree defaults that CMake bakes
// in), and the committed tests/data.
#pragma once

#include <cstdlib>
#include <filesystem>

namespace fusion::testing {

inline std::filesystem::path ModelsDir() {
  const char* env = std::getenv("FUSION_MODELS_DIR");
  return env != nullptr && *env != '\0' ? env : FUSION_TEST_MODELS_DIR;
}
inline std::filesystem::path TestDataDir() {
  const char* env = std::getenv("FUSION_TESTDATA_DIR");
  return env != nullptr && *env != '\0' ? env : FUSION_TEST_TESTDATA_DIR;
}
inline std::filesystem::path SourceDir() { return FUSION_TEST_SOURCE_DIR; }
inline std::filesystem::path CatalogueJson() { return SourceDir() / "models/manifest.json"; }
inline std::filesystem::path CommittedFaces() { return SourceDir() / "tests/data/faces"; }

}  // namespace fusion::testing
