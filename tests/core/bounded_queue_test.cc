// BoundedQueue (common/bounded_queue.h): bounded, ordered, and stoppable from either end. Runs
// under ThreadSanitizer with the other core tests (scripts/test.sh).
#include "common/bounded_queue.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/time/clock.h"

namespace fusion {
namespace {

TEST(BoundedQueueTest, KeepsOrderAndNeverHoldsMoreThanItsCapacity) {
  BoundedQueue<int> q(3);
  std::atomic<int> pushed{0};
  std::thread producer([&] {
    for (int i = 0; i < 100; ++i) {
      ASSERT_TRUE(q.Push(i));
      ++pushed;
    }
    q.Close();
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(pushed.load(), 3);  // the producer waits on a full queue
  std::vector<int> got;
  while (auto v = q.Pop()) got.push_back(*v);
  producer.join();
  ASSERT_EQ(got.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(got[i], i);
}

TEST(BoundedQueueTest, CloseDrainsWhatIsQueuedThenEnds) {
  BoundedQueue<int> q(4);
  ASSERT_TRUE(q.Push(1));
  ASSERT_TRUE(q.Push(2));
  q.Close();
  EXPECT_FALSE(q.Push(3));
  EXPECT_EQ(q.Pop(), 1);
  EXPECT_EQ(q.Pop(), 2);
  EXPECT_EQ(q.Pop(), std::nullopt);
}

TEST(BoundedQueueTest, CancelDropsTheQueueAndWakesABlockedProducer) {
  BoundedQueue<int> q(1);
  ASSERT_TRUE(q.Push(1));
  std::atomic<bool> returned{false}, result{true};
  std::thread producer([&] {
    result = q.Push(2);  // blocks: the queue is full
    returned = true;
  });
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(returned.load());
  q.Cancel();
  producer.join();
  EXPECT_FALSE(result.load());
  EXPECT_EQ(q.Pop(), std::nullopt);  // the queued item was dropped
}

TEST(BoundedQueueTest, CancelWakesABlockedConsumer) {
  BoundedQueue<int> q(2);
  std::optional<int> got = 7;
  std::thread consumer([&] { got = q.Pop(); });
  absl::SleepFor(absl::Milliseconds(20));
  q.Cancel();
  consumer.join();
  EXPECT_EQ(got, std::nullopt);
}

}  // namespace
}  // namespace fusion
