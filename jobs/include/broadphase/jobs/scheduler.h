/// \file
/// Scheduler: the one door through which the broadphase runs parallel work.
///
/// It wraps a tbb::task_arena. Either it owns one (with a chosen number of
/// threads; 0 means every hardware thread), or it borrows the arena of a
/// physics engine so that the broadphase and the engine share one pool of
/// workers. All parallel work is executed inside that arena, so
/// workerIndex() is always in [0, threadCount()) and can index per-worker
/// storage.
///
/// Small work runs inline: forEach() does not create tasks when the range is
/// no bigger than one grain, because for small work the cost of waking
/// workers exceeds the work (docs/threading.md, "Who owns the threads").
#pragma once

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/parallel_invoke.h>
#include <tbb/task_arena.h>

#include <cstdint>
#include <memory>
#include <stdexcept>

namespace bp {

/// Runs the broadphase's parallel work in one tbb::task_arena, owned or
/// borrowed from the engine (see the file comment).
class Scheduler {
 public:
  /// threads == 0: all hardware threads. threads < 0 is a bug of the caller:
  /// it throws std::invalid_argument in a build with exceptions, and in a
  /// build without (-fno-exceptions) prints the reason to stderr and aborts.
  /// (Unreachable through BroadPhase, which checks its thread count first and
  /// reports it through bp::ErrorHandler.)
  explicit Scheduler(int threads = 0);
  /// Borrows an engine's arena; it must outlive this Scheduler.
  explicit Scheduler(tbb::task_arena& shared);

  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  /// The workers of the arena, the calling thread included.
  int threadCount() const { return threads_; }

  /// Index of the calling worker inside this scheduler's arena, in
  /// [0, threadCount()). Only meaningful inside work run by this scheduler.
  static int workerIndex() { return tbb::this_task_arena::current_thread_index(); }

  /// Runs fn() inside the arena (so workerIndex() is valid) and waits.
  template <class Fn>
  void run(Fn&& fn) {
    arena_->execute(fn);
  }

  /// Calls body(begin, end) on disjoint sub-ranges covering [begin, end),
  /// each at least `grain` long unless the range is shorter. Work is isolated
  /// so that a worker waiting inside body never picks up an unrelated outer
  /// task that would reuse its per-worker scratch.
  template <class Body>
  void forEach(uint32_t begin, uint32_t end, uint32_t grain, Body&& body) {
    tbb::simple_partitioner partitioner;
    forEachWith(begin, end, grain, partitioner, body);
  }

  /// Remembers which worker ran which part of a loop, so that the same loop
  /// run again (next frame) gives each worker the same parts and the data it
  /// wrote stays in its cache. One per loop, kept across frames.
  using Affinity = tbb::affinity_partitioner;

  /// forEach, replaying the last assignment of parts to workers.
  template <class Body>
  void forEach(uint32_t begin, uint32_t end, uint32_t grain, Affinity& affinity, Body&& body) {
    forEachWith(begin, end, grain, affinity, body);
  }

  /// Asks the arena's sleeping workers to wake, without waiting: an empty task
  /// is enqueued, which one worker runs and then stays awake looking for work
  /// for a while (oneTBB spins some tens of microseconds before it sleeps
  /// again). A worker asleep joins a fork later than the first steps of a
  /// small frame take (docs/decisions.md, "Threads"), so a caller that knows
  /// parallel work is coming (a frame's moves are being gathered) can have
  /// that latency pass meanwhile. One thread: nothing to wake.
  void wake() {
    if (threads_ > 1) arena_->enqueue([] {});
  }

  /// Runs the callables concurrently (as tasks) and waits for all of them.
  template <class... Fns>
  void invoke(Fns&&... fns) {
    if (threads_ == 1) {
      arena_->execute([&] { (fns(), ...); });
      return;
    }
    arena_->execute([&] { tbb::parallel_invoke(fns...); });
  }

 private:
  template <class Partitioner, class Body>
  void forEachWith(uint32_t begin, uint32_t end, uint32_t grain, Partitioner& partitioner,
                   Body& body) {
    if (begin >= end) return;
    if (grain == 0) grain = 1;
    if (threads_ == 1 || end - begin <= grain) {
      arena_->execute([&] { body(begin, end); });
      return;
    }
    arena_->execute([&] {
      tbb::this_task_arena::isolate([&] {
        tbb::parallel_for(
            tbb::blocked_range<uint32_t>(begin, end, grain),
            [&](const tbb::blocked_range<uint32_t>& r) { body(r.begin(), r.end()); }, partitioner);
      });
    });
  }

  // oneTBB caps its worker pool at the core count; a scheduler asked for more
  // threads (oversubscription, e.g. determinism tests with 8 threads on 2
  // cores) raises the cap for as long as it lives.
  std::unique_ptr<tbb::global_control> parallelism_;
  std::unique_ptr<tbb::task_arena> owned_;
  tbb::task_arena* arena_ = nullptr;
  int threads_ = 1;
};

}  // namespace bp
