// FUZZ_CHECK: an invariant of the code under test; a violation aborts, so libFuzzer reports it
// as a crash with the input that caused it (a harness never catches exceptions: an exception
// escaping the code under test is a bug there, and libFuzzer reports it as a crash too).
#pragma once

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                  \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)
