// What the sweep's refresh pays on two threads for a box the other core
// wrote: 10^5 boxes of 32 bytes (SweepGrid's StoredBox) are written in order
// by one pinned thread, as the batch move writes them, then their min x is
// gathered eight at a time in a random order, as a cell's refresh gathers
// its members' keys, by the same CPU (`local`) or by the other one
// (`remote`). The counters are nanoseconds a box, medians of the repeats;
// `remote_over_local` is their ratio. On two threads the move writes half
// the boxes on each core while every cell's refresh reads boxes of both
// halves, so about half its gathers are remote.
//
//   build/release/bench/bp_micro_bench --benchmark_filter=CrossCoreGather
//
// On the project's Zen 5 VM, both times with the core round trip near
// 480 ns: at first local 1.1 ns a box and remote 3.3 (a /tmp driver of the same
// design, 2.4 against 7.0 TSC cycles); half an hour later local 3.6-4.7 ns
// and remote 2.8-3.2 (this benchmark, three runs): the boxes one core had
// just written then came back from DRAM (most likely: the VM's share of the L3
// shrinks when its neighbours are busy), the other core's from its L2. So the
// answer is a reading of the machine's state, like CoreRoundTrip: run them
// together, beside the measurement they are meant to explain.
#include "../bpbench/round_trip.h"
#include "../bpbench/stats.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace {

struct alignas(32) Box {
  float v[8];
};

// Runs fn on a thread pinned to `cpu` and waits for it.
template <class Fn>
void runOn(int cpu, Fn&& fn) {
  std::thread t([&] {
    bpbench::pinTo(pthread_self(), cpu);
    fn();
  });
  t.join();
}

void writeBoxes(std::vector<Box>& boxes, float frame) {
  for (size_t i = 0; i < boxes.size(); ++i)
    for (int k = 0; k < 8; ++k) boxes[i].v[k] = frame + float(i) + float(k);
}

// Nanoseconds a box for the gather of every box's min x in `order`.
double gatherNs(const std::vector<Box>& boxes, const std::vector<uint32_t>& order,
                std::vector<float>& out) {
  const auto t0 = std::chrono::steady_clock::now();
  size_t e = 0;
#if defined(__AVX2__)
  const float* base = boxes.data()->v;
  for (; e + 8 <= order.size(); e += 8) {
    const __m256i id = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(order.data() + e));
    _mm256_storeu_ps(out.data() + e, _mm256_i32gather_ps(base, _mm256_slli_epi32(id, 3), 4));
  }
#endif
  for (; e < order.size(); ++e) out[e] = boxes[order[e]].v[0];
  benchmark::DoNotOptimize(out.data());
  const std::chrono::duration<double, std::nano> dt = std::chrono::steady_clock::now() - t0;
  return dt.count() / double(order.size());
}

void CrossCoreGather(benchmark::State& state) {
  int cpus[2];
  if (!bpbench::firstTwoCpus(cpus)) {
    state.SkipWithError("needs two CPUs");
    return;
  }
  const size_t n = size_t(state.range(0));
  std::vector<Box> boxes(n);
  std::vector<uint32_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = uint32_t(i);
  std::shuffle(order.begin(), order.end(), std::mt19937(1));
  std::vector<float> out(n);
  std::vector<double> local, remote;
  float frame = 0.0f;
  for (auto _ : state) {
    runOn(cpus[0], [&] { writeBoxes(boxes, frame += 1.0f); });
    runOn(cpus[0], [&] { local.push_back(gatherNs(boxes, order, out)); });
    runOn(cpus[0], [&] { writeBoxes(boxes, frame += 1.0f); });
    runOn(cpus[1], [&] { remote.push_back(gatherNs(boxes, order, out)); });
  }
  const double l = bpbench::median(local), r = bpbench::median(remote);
  state.counters["local_ns_per_box"] = l;
  state.counters["remote_ns_per_box"] = r;
  state.counters["remote_over_local"] = r / l;
}
BENCHMARK(CrossCoreGather)->Arg(100000)->Iterations(40)->Unit(benchmark::kMillisecond);

}  // namespace
