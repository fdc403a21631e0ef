// Chooses the generator stage's implementation from the model catalogue (models/manifest.json):
// format "builtin" with name "classical-fusion" gives ClassicalGenerator; format "torchscript"
// gives TorchScriptGenerator loaded from the entry's first file (verified by sha256 first).
// Both serve the tensor contract of generator.h.
// Errors: NotFound for an unknown name; InvalidArgument for a non-"generate" stage, an unknown
// format, or a TorchScript entry without files; the catalogue's NotFound/DataLoss for missing or
// corrupt files; the loader's errors.
// Thread-safety: free function; the catalogue is only read.
#pragma once

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "models/catalogue/catalogue.h"
#include "models/generator/generator.h"

namespace fusion::models {

absl::StatusOr<std::unique_ptr<FusionGenerator>> CreateGenerator(const ModelCatalogue& catalogue,
                                                                 std::string_view name);

}  // namespace fusion::models
