// The pair pipeline's last steps: workers append pairs to per-worker
// buffers, then the buffers are merged into one list sorted by Pair::key().
//
// BM_FillBuffers/threads/padded: the append phase with the per-worker
//   std::vector headers packed side by side (24 bytes apart: every push_back
//   writes an end pointer next to another worker's) or in bp::PerWorker
//   (128-byte slots).
// BM_MergeSort/threads/parallel: concatenating the buffers (parallel copy at
//   prefix-summed offsets) and sorting by the unique 64-bit key, with
//   std::sort or tbb::parallel_sort (deterministic: keys are unique).
#include <benchmark/benchmark.h>

#include <broadphase/jobs/per_worker.h>
#include <broadphase/jobs/scheduler.h>
#include <broadphase/pair.h>

#include <tbb/parallel_sort.h>

#include <algorithm>
#include <memory>
#include <thread>
#include <vector>

namespace {

constexpr uint32_t kPairs = 1 << 20;  // about a uniform 10^6 scene's pairs / 2
constexpr uint32_t kGrain = 4096;

bp::Scheduler& schedulerFor(int threads) {
  static std::vector<std::unique_ptr<bp::Scheduler>> cache(257);
  auto& s = cache[static_cast<size_t>(threads)];
  if (!s) s = std::make_unique<bp::Scheduler>(threads);
  return *s;
}

// Pair number i: a scattered, unique (a, b) with a < b.
bp::Pair pairOf(uint32_t i) {
  uint64_t z = (uint64_t(i) + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ull;
  const uint32_t a = static_cast<uint32_t>(z >> 40) & 0xFFFFF;  // 20 bits
  return {a, a + 1 + i};                                        // b - a - 1 = i: unique per i
}

// Fills one buffer per worker with pairs [0, kPairs), each worker appending
// to buffers[workerIndex()].
template <class Buffers>
void fill(bp::Scheduler& scheduler, Buffers& buffers) {
  scheduler.forEach(0, kPairs, kGrain, [&](uint32_t begin, uint32_t end) {
    std::vector<bp::Pair>& out = buffers(bp::Scheduler::workerIndex());
    for (uint32_t i = begin; i < end; ++i) {
      const bp::Pair p = pairOf(i);
      if ((p.a ^ p.b) & 1) out.push_back(p);  // about half of the candidates "overlap"
    }
  });
}

struct PackedBuffers {
  explicit PackedBuffers(int n) : v(static_cast<size_t>(n)) {}
  std::vector<bp::Pair>& operator()(int w) { return v[static_cast<size_t>(w)]; }
  std::vector<std::vector<bp::Pair>> v;
};

struct PaddedBuffers {
  explicit PaddedBuffers(int n) : v(n) {}
  std::vector<bp::Pair>& operator()(int w) { return v[w]; }
  bp::PerWorker<std::vector<bp::Pair>> v;
};

void BM_FillBuffers(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const bool padded = state.range(1) != 0;
  bp::Scheduler& scheduler = schedulerFor(threads);
  for (auto _ : state) {
    if (padded) {
      PaddedBuffers b(threads);
      fill(scheduler, b);
      benchmark::DoNotOptimize(b);
    } else {
      PackedBuffers b(threads);
      fill(scheduler, b);
      benchmark::DoNotOptimize(b);
    }
  }
  state.SetItemsProcessed(int64_t(state.iterations()) * kPairs);
  state.SetLabel(padded ? "PerWorker (128-byte slots)" : "packed vector headers");
}

void BM_MergeSort(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const bool parallel = state.range(1) != 0;
  bp::Scheduler& scheduler = schedulerFor(threads);
  PaddedBuffers buffers(threads);
  fill(scheduler, buffers);
  std::vector<bp::Pair> merged;
  for (auto _ : state) {
    // Offsets by prefix sum, then each buffer copied to its place.
    std::vector<size_t> offset(static_cast<size_t>(threads) + 1, 0);
    for (int w = 0; w < threads; ++w) offset[w + 1] = offset[w] + buffers(w).size();
    merged.resize(offset.back());
    scheduler.forEach(0, static_cast<uint32_t>(threads), 1, [&](uint32_t lo, uint32_t hi) {
      for (uint32_t w = lo; w < hi; ++w)
        std::copy(buffers(int(w)).begin(), buffers(int(w)).end(), merged.begin() + offset[w]);
    });
    auto byKey = [](const bp::Pair& x, const bp::Pair& y) { return x.key() < y.key(); };
    if (parallel) {
      scheduler.run([&] { tbb::parallel_sort(merged.begin(), merged.end(), byKey); });
    } else {
      std::sort(merged.begin(), merged.end(), byKey);
    }
    benchmark::DoNotOptimize(merged.data());
  }
  if (!std::is_sorted(merged.begin(), merged.end())) state.SkipWithError("not sorted");
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(merged.size()));
  state.SetLabel(parallel ? "tbb::parallel_sort" : "std::sort");
}

void threadArgs(benchmark::internal::Benchmark* b) {
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> counts;
  for (int t = 1; t < hw; t *= 2) counts.push_back(t);
  counts.push_back(hw);
  for (int t : counts) {
    b->Args({t, 0});
    b->Args({t, 1});
  }
}

}  // namespace

BENCHMARK(BM_FillBuffers)
    ->ArgNames({"threads", "padded"})
    ->Apply(threadArgs)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MergeSort)
    ->ArgNames({"threads", "parallel"})
    ->Apply(threadArgs)
    ->Unit(benchmark::kMillisecond);
