// SerialWorker: one thread that runs posted closures in the order they were posted — work taken
// off a caller's thread that must not block there (FusionService's submits: the job's plan and
// its journal write, off gRPC's threads).
// Post() blocks while `capacity` closures wait (back pressure, bounded memory). The destructor
// runs every closure already posted, then joins.
// Thread-safety: Post() from any thread; the closures run on the worker's thread, one at a time.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <thread>
#include <utility>

#include "common/bounded_queue.h"

namespace fusion {

class SerialWorker {
 public:
  explicit SerialWorker(size_t capacity) : queue_(capacity), thread_([this] { Loop(); }) {}
  ~SerialWorker() {
    queue_.Close();
    thread_.join();
  }
  SerialWorker(const SerialWorker&) = delete;
  SerialWorker& operator=(const SerialWorker&) = delete;

  void Post(std::function<void()> work) { queue_.Push(std::move(work)); }

 private:
  void Loop() {
    while (std::optional<std::function<void()>> work = queue_.Pop()) (*work)();
  }

  BoundedQueue<std::function<void()>> queue_;
  std::thread thread_;  // last: started once the queue exists
};

}  // namespace fusion
