// ScriptErrorText: the message of an exception from a TorchScript module's forward, for a Status.
// The interpreter's std::runtime_error carries the serialized code, two tracebacks and then the
// error itself ("RuntimeError: ..."); clients get that last line only (ExceptionText otherwise).
// Thread-safety: a pure function.
#pragma once

#include <exception>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "models/common/exception_text.h"

namespace fusion::models {

inline std::string ScriptErrorText(const std::exception& e) {
  std::string text = ExceptionText(e);
  if (!absl::StrContains(text, "TorchScript interpreter")) return text;
  const std::string trimmed(absl::StripTrailingAsciiWhitespace(text));
  const size_t nl = trimmed.rfind('\n');
  return nl == std::string::npos ? trimmed : trimmed.substr(nl + 1);
}

}  // namespace fusion::models
