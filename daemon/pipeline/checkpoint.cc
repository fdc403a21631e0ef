#include "pipeline/checkpoint.h"

#include "absl/strings/str_cat.h"

namespace fusion {

absl::Status Checkpoint::Check(absl::string_view unit, size_t index, size_t count) const {
  if (give_way_) give_way_();
  if (!cancelled_ || !cancelled_()) return absl::OkStatus();
  return absl::CancelledError(absl::StrCat("job cancelled during stage '", stage_, "' (", where_, unit,
                                           " ", index + 1, " of ", count, ")"));
}

Checkpoint Checkpoint::Within(absl::string_view where) const {
  Checkpoint inner = *this;
  inner.where_ = absl::StrCat(where_, where, ", ");
  return inner;
}

}  // namespace fusion
