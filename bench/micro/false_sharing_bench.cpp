// False sharing: T tasks of a bp::Scheduler each bump their own counter, the
// counters either packed side by side (8 bytes apart, one cache line for up
// to 8 of them) or each in a bp::CachePadded slot (128 bytes apart).
//
// BM_Counters/threads/mode/layout reports increments per second;
// BM_FalseSharingRatio/threads/mode times both layouts in each iteration and
// reports `packed_over_padded` (> 1: how much slower packed is).
// mode 0: relaxed fetch_add (a locked RMW); mode 1: relaxed load + store
// (what a plain counter compiles to, minus the compiler keeping it in a
// register).
#include <benchmark/benchmark.h>

#include <broadphase/jobs/cache_padded.h>
#include <broadphase/jobs/scheduler.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

namespace {

constexpr uint64_t kIncrements = 1 << 20;  // per task and iteration: ~ms, so tasks overlap

bp::Scheduler& schedulerFor(int threads) {
  static std::vector<std::unique_ptr<bp::Scheduler>> cache(257);
  auto& s = cache[static_cast<size_t>(threads)];
  if (!s) s = std::make_unique<bp::Scheduler>(threads);
  return *s;
}

struct Packed {
  explicit Packed(int n) : c(static_cast<size_t>(n)) {}
  std::atomic<uint64_t>& at(uint32_t i) { return c[i]; }
  std::vector<std::atomic<uint64_t>> c;
};

struct Padded {
  explicit Padded(int n) : c(static_cast<size_t>(n)) {}
  std::atomic<uint64_t>& at(uint32_t i) { return c[i].value; }
  std::vector<bp::CachePadded<std::atomic<uint64_t>>> c;
};

// Every task runs kIncrements on counter[task]; one task per thread. The
// tasks first wait (up to 50 ms) until all of them have started, so that they
// really run at the same time; returns whether they all did.
template <class Counters>
bool hammer(bp::Scheduler& scheduler, Counters& counters, int mode) {
  const uint32_t tasks = static_cast<uint32_t>(scheduler.threadCount());
  std::atomic<uint32_t> arrived{0};
  std::atomic<bool> together{true};
  scheduler.forEach(0, tasks, 1, [&](uint32_t begin, uint32_t end) {
    for (uint32_t t = begin; t < end; ++t) {
      arrived.fetch_add(1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
      while (arrived.load() < tasks) {
        if (std::chrono::steady_clock::now() > deadline) {
          together = false;  // no free core: this task runs alone
          break;
        }
      }
      std::atomic<uint64_t>& c = counters.at(t);
      if (mode == 0) {
        for (uint64_t k = 0; k < kIncrements; ++k) c.fetch_add(1, std::memory_order_relaxed);
      } else {
        for (uint64_t k = 0; k < kIncrements; ++k)
          c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      }
    }
  });
  return together.load();
}

// Seconds for one round; counts rounds where the tasks did not overlap.
template <class Counters>
double secondsOf(bp::Scheduler& scheduler, int mode, int64_t& apart) {
  Counters counters(scheduler.threadCount());
  const auto t0 = std::chrono::steady_clock::now();
  apart += !hammer(scheduler, counters, mode);
  const auto t1 = std::chrono::steady_clock::now();
  benchmark::DoNotOptimize(counters);
  return std::chrono::duration<double>(t1 - t0).count();
}

void BM_Counters(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int mode = static_cast<int>(state.range(1));
  const bool padded = state.range(2) != 0;
  bp::Scheduler& scheduler = schedulerFor(threads);
  int64_t apart = 0;
  for (auto _ : state) {
    const double s = padded ? secondsOf<Padded>(scheduler, mode, apart)
                            : secondsOf<Packed>(scheduler, mode, apart);
    state.SetIterationTime(s);
  }
  state.counters["rounds_not_overlapped"] = double(apart);
  state.SetItemsProcessed(int64_t(state.iterations()) * threads * int64_t(kIncrements));
  state.SetLabel(std::string(padded ? "padded" : "packed") + (mode ? " load+store" : " fetch_add"));
}

void BM_FalseSharingRatio(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const int mode = static_cast<int>(state.range(1));
  bp::Scheduler& scheduler = schedulerFor(threads);
  double packed = 0, padded = 0;
  int64_t apart = 0;
  for (auto _ : state) {
    packed += secondsOf<Packed>(scheduler, mode, apart);
    padded += secondsOf<Padded>(scheduler, mode, apart);
  }
  state.counters["rounds_not_overlapped"] = double(apart);
  state.counters["packed_ms"] = 1e3 * packed / double(state.iterations());
  state.counters["padded_ms"] = 1e3 * padded / double(state.iterations());
  state.counters["packed_over_padded"] = packed / padded;
  state.SetLabel(mode ? "load+store" : "fetch_add");
}

// 1, 2, 4, ... up to the hardware threads (and the hardware count itself).
void threadArgs(benchmark::internal::Benchmark* b, bool layouts) {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> counts;
  for (int t = 1; t < hw; t *= 2) counts.push_back(t);
  counts.push_back(hw);
  for (int t : counts)
    for (int mode : {0, 1}) {
      if (layouts) {
        b->Args({t, mode, 0});
        b->Args({t, mode, 1});
      } else {
        b->Args({t, mode});
      }
    }
}

}  // namespace

BENCHMARK(BM_Counters)
    ->ArgNames({"threads", "mode", "padded"})
    ->Apply([](benchmark::internal::Benchmark* b) { threadArgs(b, true); })
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FalseSharingRatio)
    ->ArgNames({"threads", "mode"})
    ->Apply([](benchmark::internal::Benchmark* b) { threadArgs(b, false); })
    ->Unit(benchmark::kMillisecond);
