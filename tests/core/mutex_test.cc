// common/mutex.h (both builds: absl::Mutex, or std::shared_mutex under TSan) and the tests'
// Notification built on it.
#include "common/mutex.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "notification.h"

namespace fusion {
namespace {

TEST(Mutex, ReaderLocksAreSharedAndExcludeTheWriter) {
  Mutex mu;
  Notification reader_in, second_reader_done, writer_in;
  std::thread reader([&] {
    ReaderMutexLock lock(&mu);
    reader_in.Notify();
    // A second reader gets in while this one holds the lock.
    EXPECT_TRUE(second_reader_done.WaitForNotificationWithTimeout(absl::Seconds(20)));
    // The writer does not.
    EXPECT_FALSE(writer_in.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  });
  ASSERT_TRUE(reader_in.WaitForNotificationWithTimeout(absl::Seconds(20)));
  std::thread second([&] {
    ReaderMutexLock lock(&mu);
    second_reader_done.Notify();
  });
  // The writer starts once the second reader is through: a writer already waiting keeps new
  // readers out (absl::Mutex favours waiting writers), so starting both at once let the writer
  // win the race on a loaded CI machine and the second reader waited out the 20 s.
  EXPECT_TRUE(second_reader_done.WaitForNotificationWithTimeout(absl::Seconds(20)));
  std::thread writer([&] {
    MutexLock lock(&mu);
    writer_in.Notify();
  });
  reader.join();
  second.join();
  writer.join();
  EXPECT_TRUE(writer_in.HasBeenNotified());
}

TEST(Mutex, GuardsACounterAcrossThreads) {
  Mutex mu;
  int n = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) {
        MutexLock lock(&mu);
        ++n;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  ReaderMutexLock lock(&mu);
  EXPECT_EQ(n, 4000);
}

TEST(CondVar, PastDeadlineTimesOutAtOnceAndSignalWakes) {
  Mutex mu;
  CondVar cv;
  bool ready = false;
  {
    MutexLock lock(&mu);
    EXPECT_TRUE(cv.WaitWithDeadline(&mu, absl::InfinitePast()));
    EXPECT_TRUE(cv.WaitWithDeadline(&mu, absl::Now() + absl::Milliseconds(5)));
  }
  std::thread t([&] {
    MutexLock lock(&mu);
    ready = true;
    cv.SignalAll();
  });
  {
    MutexLock lock(&mu);
    while (!ready) cv.WaitWithDeadline(&mu, absl::InfiniteFuture());
  }
  t.join();
}

TEST(Notification, WaitsUntilNotified) {
  Notification n;
  EXPECT_FALSE(n.HasBeenNotified());
  EXPECT_FALSE(n.WaitForNotificationWithTimeout(absl::Milliseconds(5)));
  int payload = 0;
  std::thread t([&] {
    payload = 42;  // ordered before the waiter's return by Notify()
    n.Notify();
  });
  n.WaitForNotification();
  EXPECT_EQ(payload, 42);
  EXPECT_TRUE(n.WaitForNotificationWithTimeout(absl::Milliseconds(5)));
  t.join();
}

}  // namespace
}  // namespace fusion
