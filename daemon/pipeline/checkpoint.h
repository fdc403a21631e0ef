// Checkpoint: where a long stage looks for cancellation between its units of work — faces of
// the per-face stages, tiles of a tiled enhance/upscale, detection passes — so a cancelled job
// (the owner's CancelJob, or the daemon stopping after its drain deadline) ends within one unit
// instead of at the end of the stage.
// A unit that has started runs to its end: a network's forward pass is not interruptible, and a
// unit is at most one face crop, one tile or one detection pass.
// The CANCELLED message names the stage and the unit that did not run, outermost first:
//   "job cancelled during stage 'enhance' (face 3 of 13, tile 5 of 16)"
// (faces 1-2 and tiles 1-4 of face 3 ran). A stage body returns it unchanged; the OOM ladder
// passes it through at once (oom_ladder.h), its lease ended.
// Giving way: a checkpoint made with `give_way` calls it first at every Check(), so batch work
// pauses between its units while live frames run (JobRunner::Context::GiveWay: it blocks for a
// bounded time, the unit's lease still held).
// Thread-safety: a value type; Check() calls the predicates, which must be safe to call from the
// stage's threads at once (JobRunner::Context::Cancelled() and GiveWay() are).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace fusion {

class Checkpoint {
 public:
  // Never cancelled (direct calls of the stage functions, tests).
  Checkpoint() = default;
  // `cancelled` is polled at every Check(); `stage` names the stage in the message.
  Checkpoint(std::string stage, std::function<bool()> cancelled, std::function<void()> give_way = nullptr)
      : stage_(std::move(stage)), cancelled_(std::move(cancelled)), give_way_(std::move(give_way)) {}

  // OK when unit `index` (0-based) of `count` may start; CANCELLED naming it otherwise.
  absl::Status Check(absl::string_view unit, size_t index, size_t count) const;
  // The checkpoint for the units inside `where` (e.g. "face 3 of 13" for a face's tiles, or
  // "target image" for its faces): its messages name both, "(face 3 of 13, tile 5 of 16)".
  Checkpoint Within(absl::string_view where) const;

 private:
  std::string stage_;
  std::string where_;  // "face 3 of 13, " of the enclosing units
  std::function<bool()> cancelled_;
  std::function<void()> give_way_;
};

}  // namespace fusion
