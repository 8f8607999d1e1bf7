#include <broadphase/jobs/cache_padded.h>
#include <broadphase/jobs/per_worker.h>
#include <broadphase/jobs/scheduler.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <numeric>
#include <vector>

namespace bp {
namespace {

TEST(Scheduler, ThreadCounts) {
  EXPECT_EQ(Scheduler(1).threadCount(), 1);
  EXPECT_EQ(Scheduler(3).threadCount(), 3);
  EXPECT_GE(Scheduler(0).threadCount(), 1);
}

// A negative count is a bug of the caller: an exception where there are
// exceptions, else a message and abort (BroadPhase checks its count first).
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
TEST(Scheduler, NegativeThreadCountThrows) { EXPECT_THROW(Scheduler(-1), std::invalid_argument); }
#else
TEST(SchedulerDeathTest, NegativeThreadCountAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(Scheduler(-1), "thread count -1 is negative");
}
#endif

TEST(Scheduler, ForEachCoversRangeExactlyOnce) {
  for (int threads : {1, 2, 8}) {
    Scheduler s(threads);
    std::vector<std::atomic<int>> hits(10007);
    s.forEach(0, 10007, 64, [&](uint32_t b, uint32_t e) {
      for (uint32_t i = b; i < e; ++i) hits[i].fetch_add(1, std::memory_order_relaxed);
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
    // Empty and single-grain ranges.
    int calls = 0;
    s.forEach(5, 5, 1, [&](uint32_t, uint32_t) { ++calls; });
    EXPECT_EQ(calls, 0);
    s.forEach(0, 3, 100, [&](uint32_t b, uint32_t e) { calls += int(e - b); });
    EXPECT_EQ(calls, 3);
  }
}

TEST(Scheduler, WorkerIndexIsInRangeAndPerWorkerSums) {
  for (int threads : {1, 2, 8}) {
    Scheduler s(threads);
    PerWorker<uint64_t> sums(s.threadCount());
    std::atomic<bool> inRange{true};
    s.forEach(0, 100000, 1000, [&](uint32_t b, uint32_t e) {
      const int w = Scheduler::workerIndex();
      if (w < 0 || w >= s.threadCount()) inRange = false;
      for (uint32_t i = b; i < e; ++i) sums.local() += i;
    });
    EXPECT_TRUE(inRange.load());
    uint64_t total = 0;
    sums.forEachSlot([&](uint64_t v) { total += v; });
    EXPECT_EQ(total, 100000ull * 99999ull / 2);
  }
}

TEST(Scheduler, OversubscribedSchedulerRunsThatManyThreads) {
  Scheduler s(8);
  std::atomic<int> inside{0}, peak{0};
  s.forEach(0, 64, 1, [&](uint32_t, uint32_t) {
    const int now = ++inside;
    int p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
    // Hold the task long enough for the others to start.
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
    while (std::chrono::steady_clock::now() < until) {
    }
    --inside;
  });
  EXPECT_GT(peak.load(), 2);  // more than the cores this machine may have
}

TEST(Scheduler, SharedArena) {
  tbb::task_arena arena(2);
  Scheduler s(arena);
  EXPECT_EQ(s.threadCount(), 2);
  std::atomic<int> n{0};
  s.invoke([&] { ++n; }, [&] { ++n; }, [&] { ++n; });
  EXPECT_EQ(n.load(), 3);
}

// wake() only enqueues: it returns at once, work after it runs as usual on
// every worker, and a scheduler destroyed with wake-ups still queued neither
// hangs nor touches freed memory (the sanitizer builds run this).
TEST(Scheduler, WakeIsHarmless) {
  for (int threads : {1, 2}) {
    Scheduler s(threads);
    for (int k = 0; k < 1000; ++k) s.wake();
    std::atomic<int> arrived{0};
    // Every part waits for all others: it finishes only if every worker took one.
    s.forEach(0, uint32_t(threads), 1, [&](uint32_t b, uint32_t e) {
      arrived += int(e - b);
      while (arrived.load() < threads) {
      }
    });
    EXPECT_EQ(arrived.load(), threads);
    s.wake();
  }
  tbb::task_arena arena(2);
  {
    Scheduler shared(arena);
    shared.wake();
  }
  arena.execute([] {});
}

TEST(CachePadded, SlotsDoNotShareLines) {
  PerWorker<int> slots(4);
  for (int i = 1; i < 4; ++i) {
    const auto gap =
        reinterpret_cast<const char*>(&slots[i]) - reinterpret_cast<const char*>(&slots[i - 1]);
    EXPECT_EQ(gap, static_cast<std::ptrdiff_t>(kFalseSharingRange));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(&slots[i]) % kFalseSharingRange, 0u);
  }
}

}  // namespace
}  // namespace bp
