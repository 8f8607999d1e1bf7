// parallelFor: Scheduler::forEach as SweepGrid uses it, plus the
// happens-before edges ThreadSanitizer cannot see by itself.
//
// libtbb is not built with TSan, so TSan misses the synchronisation of task
// spawn and join and reports every handoff (data written by the caller and
// read by a task, buffers filled by a task and read after the loop) as a race.
// Under TSan this wrapper states the two real edges: the caller's writes
// happen before every task, and every task's writes happen before the caller
// continues. Tasks are not ordered with each other, so races between
// concurrent tasks are still reported. Without TSan it is forEach itself.
#pragma once

#include <broadphase/jobs/scheduler.h>

#include <cstddef>
#include <cstdint>
#include <thread>
#include <utility>

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace bp {

#if defined(__SANITIZE_THREAD__)
// Fixed addresses: a task must acquire before it reads anything the caller
// wrote, including its own closure, so the token can not be a capture.
inline char tsanTaskStart;
inline char tsanTaskFinish;

// TBB keeps its join counters (the root wait node of a parallel_for) in the
// caller's stack frames and workers decrement them atomically; TSan, blind to
// TBB's own wait, later reports the caller's reuse of that stack memory as a
// race with the worker's decrement. Acquiring each word of the stack the loop
// ran in (once it is over, and before a task runs on the calling thread)
// records those joins.
[[gnu::noinline]] inline void tsanAcquireStackBelow(uintptr_t bytes) {
  char probe = 0;
  const uintptr_t top = reinterpret_cast<uintptr_t>(&probe) + 512;
  for (uintptr_t offset = 0; offset < bytes; offset += 4)
    __tsan_acquire(reinterpret_cast<void*>(top - offset));
}
#endif

template <class Body>
void parallelFor(Scheduler& scheduler, uint32_t begin, uint32_t end, uint32_t grain, Body&& body) {
#if defined(__SANITIZE_THREAD__)
  const std::thread::id caller = std::this_thread::get_id();
  const auto task = [&](uint32_t b, uint32_t e) {
    __tsan_acquire(&tsanTaskStart);
    if (std::this_thread::get_id() == caller) tsanAcquireStackBelow(65536);
    body(b, e);
    __tsan_release(&tsanTaskFinish);
  };
  __tsan_release(&tsanTaskStart);
  scheduler.forEach(begin, end, grain, task);
  __tsan_acquire(&tsanTaskFinish);
  tsanAcquireStackBelow(262144);
#else
  scheduler.forEach(begin, end, grain, std::forward<Body>(body));
#endif
}

}  // namespace bp
