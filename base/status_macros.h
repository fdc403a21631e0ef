// Status macros: propagate an error status to the caller, the one way fusiond unwraps
// absl::Status and absl::StatusOr at its boundaries.
//
//   RETURN_IF_ERROR(expr);           // expr is an absl::Status; returns it when not OK
//   ASSIGN_OR_RETURN(lhs, expr);     // expr is an absl::StatusOr<T>; returns its status when
//                                    // not OK, else moves its value into lhs ("auto x" or "x")
//
// The enclosing function returns absl::Status or absl::StatusOr<U>. ASSIGN_OR_RETURN expands to
// more than one statement: it cannot be the body of an unbraced if/else. expr is evaluated once.
#ifndef FUSION_BASE_STATUS_MACROS_H_
#define FUSION_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RETURN_IF_ERROR(...)                                         \
  do {                                                               \
    if (::absl::Status fusion_status_ = (__VA_ARGS__); !fusion_status_.ok()) \
      return fusion_status_;                                         \
  } while (false)

#define FUSION_STATUS_CONCAT_(a, b) a##b
#define FUSION_STATUS_CONCAT(a, b) FUSION_STATUS_CONCAT_(a, b)

#define ASSIGN_OR_RETURN(lhs, ...) \
  FUSION_ASSIGN_OR_RETURN_(FUSION_STATUS_CONCAT(fusion_statusor_, __LINE__), lhs, __VA_ARGS__)

#define FUSION_ASSIGN_OR_RETURN_(statusor, lhs, ...)              \
  auto statusor = (__VA_ARGS__);                                  \
  if (!statusor.ok()) return std::move(statusor).status();        \
  lhs = *std::move(statusor)

#endif  // FUSION_BASE_STATUS_MACROS_H_
