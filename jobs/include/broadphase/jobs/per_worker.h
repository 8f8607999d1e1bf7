/// \file
/// `PerWorker<T>`: one `T` for each worker of a Scheduler, each on its own
/// 128-byte-aligned slot so that workers filling their buffers side by side
/// never write to the same cache line pair.
#pragma once

#include <broadphase/jobs/cache_padded.h>
#include <broadphase/jobs/scheduler.h>

#include <cassert>
#include <vector>

namespace bp {

/// One `T` per worker of a Scheduler, each in its own CachePadded slot:
/// per-thread scratch and output buffers that parallel work fills without
/// locks and without false sharing, then merges on one thread.
///
/// A slot is chosen by Scheduler::workerIndex(), so local() is only valid
/// inside work run by the scheduler the storage was sized for. Iteration
/// order over slots is fixed (slot 0 first), which the merge steps rely on
/// only for speed: results are made deterministic by sorting, not by order.
/// Not thread-safe itself: resize() and forEachSlot() run outside parallel
/// work; inside it, each worker touches only its own slot.
template <class T>
class PerWorker {
 public:
  /// No slots: resize() before use.
  PerWorker() = default;
  /// `workers` value-initialised slots; pass Scheduler::threadCount().
  explicit PerWorker(int workers) : slots_(static_cast<std::size_t>(workers)) {}

  /// Sets the slot count to `workers`: slots below it keep their values, new
  /// ones are value-initialised. Invalidates references to every slot.
  void resize(int workers) { slots_.resize(static_cast<std::size_t>(workers)); }
  /// The slot count: the thread count the storage was sized for.
  int size() const { return static_cast<int>(slots_.size()); }

  /// The calling worker's slot. Only inside work run by a Scheduler
  /// (Scheduler::run(), forEach(), invoke()) whose threadCount() is at most
  /// size(); elsewhere the index may name another thread's slot or be out of
  /// range (an assert in debug builds, undefined behaviour in release builds).
  T& local() {
    const int i = Scheduler::workerIndex();
    assert(i >= 0 && i < size());
    return slots_[static_cast<std::size_t>(i)].value;
  }
  /// Slot `i`, 0 <= i < size() (unchecked), for the serial merge after the
  /// parallel part.
  T& operator[](int i) { return slots_[static_cast<std::size_t>(i)].value; }
  /// Slot `i`, 0 <= i < size() (unchecked).
  const T& operator[](int i) const { return slots_[static_cast<std::size_t>(i)].value; }

  /// Calls fn(T&) on every slot on the calling thread, slot 0 first: to clear
  /// the buffers before a parallel step or gather them after it.
  template <class Fn>
  void forEachSlot(Fn&& fn) {
    for (auto& s : slots_) fn(s.value);
  }

 private:
  // std::vector honours the over-alignment of CachePadded (C++17 aligned new).
  std::vector<CachePadded<T>> slots_;
};

}  // namespace bp
