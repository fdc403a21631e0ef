// ExceptionText: the message of an exception caught at a LibTorch edge, for a Status.
// c10::Error::what() appends "Exception raised from <function> at <file>:<line>" and a C++
// backtrace of dozens of frames; clients get the message only (the first line of what()).
// Thread-safety: a pure function. c10 headers only.
#pragma once

#include <exception>
#include <string>

#include <c10/util/Exception.h>

namespace fusion {

inline std::string ExceptionText(const std::exception& e) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

}  // namespace fusion
