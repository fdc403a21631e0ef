// HostCopyOf: a model's host copy for the pipeline_torch tests that call stage functions
// directly (defined in pipeline_env.cc). Test-only.
#pragma once

#include <memory>
#include <string>

#include "loader/model_store.h"

namespace fusion {

// From a store of its own (the project catalogue over the fetched weights, device "cpu", not
// metered, never evicted), made on first use. Throws std::runtime_error with the status when the
// model cannot be loaded.
std::shared_ptr<const ModelCopy> HostCopyOf(const std::string& model);

}  // namespace fusion
