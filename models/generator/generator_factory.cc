// Catalogue -> generator implementation (generator_factory.h).
#include "models/generator/generator_factory.h"

#include "absl/strings/str_cat.h"
#include "models/generator/classical_generator.h"
#include "models/generator/torchscript_generator.h"
#include "base/status_macros.h"

namespace fusion::models {

absl::StatusOr<std::unique_ptr<FusionGenerator>> CreateGenerator(const ModelCatalogue& catalogue,
                                                                 std::string_view name) {
  ASSIGN_OR_RETURN(const ModelSpec* spec, catalogue.Get(name));
  const ModelSpec& m = *spec;
  if (m.stage != "generate") {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.name, "' is a ", m.stage, " model, not a generator"));
  }
  if (m.format == "builtin" && m.name == "classical-fusion") {
    ASSIGN_OR_RETURN(auto gen, ClassicalGenerator::Create({}));
    return std::unique_ptr<FusionGenerator>(std::move(gen));
  }
  if (m.format == "torchscript") {
    if (m.files.empty()) return absl::InvalidArgumentError(absl::StrCat("generator '", m.name, "' lists no file"));
    if (auto s = catalogue.Verify(m.name); !s.ok()) return s;
    ASSIGN_OR_RETURN(auto gen, TorchScriptGenerator::Load(catalogue.PathOf(m.files.front()).string()));
    return std::unique_ptr<FusionGenerator>(std::move(gen));
  }
  return absl::InvalidArgumentError(absl::StrCat("generator '", m.name, "' has unsupported format '", m.format, "'"));
}

}  // namespace fusion::models
