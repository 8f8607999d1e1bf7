// PerWorker<T>: one T for each worker of a Scheduler, each on its own
// 128-byte-aligned slot so that workers filling their buffers side by side
// never write to the same cache line pair.
//
// A slot is chosen by Scheduler::workerIndex(), so local() is only valid
// inside work run by the scheduler the storage was sized for. Iteration
// order over slots is fixed (slot 0 first), which the merge steps rely on
// only for speed: results are made deterministic by sorting, not by order.
#pragma once

#include <broadphase/jobs/cache_padded.h>
#include <broadphase/jobs/scheduler.h>

#include <cassert>
#include <vector>

namespace bp {

template <class T>
class PerWorker {
 public:
  PerWorker() = default;
  explicit PerWorker(int workers) : slots_(static_cast<std::size_t>(workers)) {}

  void resize(int workers) { slots_.resize(static_cast<std::size_t>(workers)); }
  int size() const { return static_cast<int>(slots_.size()); }

  T& local() {
    const int i = Scheduler::workerIndex();
    assert(i >= 0 && i < size());
    return slots_[static_cast<std::size_t>(i)].value;
  }
  T& operator[](int i) { return slots_[static_cast<std::size_t>(i)].value; }
  const T& operator[](int i) const { return slots_[static_cast<std::size_t>(i)].value; }

  template <class Fn>
  void forEachSlot(Fn&& fn) {
    for (auto& s : slots_) fn(s.value);
  }

 private:
  // std::vector honours the over-alignment of CachePadded (C++17 aligned new).
  std::vector<CachePadded<T>> slots_;
};

}  // namespace bp
