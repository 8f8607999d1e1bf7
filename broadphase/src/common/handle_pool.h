// HandlePool: where ProxyId handles come from (one inside the facade and one
// in each structure).
//
// A handle is a slot index plus the generation of that slot when the handle
// was issued. Removing a proxy bumps its slot's generation, so every copy of
// the old handle becomes stale and is rejected. Generations of each pool
// start at a per-pool salt, so a handle from another structure is almost
// surely rejected too rather than silently naming some other proxy.
//
// Slots are reused last-freed first and indices stay dense (< capacity()).
// A fresh pool issues 0, 1, 2, ... in order.
#pragma once

#include <broadphase/proxy_id.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace bp {

/// The allocator of ProxyId handles: one inside BroadPhase and each of its
/// structures. Members marked internal serve the library's batch checks.
/// Not thread-safe: const members may run concurrently, any other call needs
/// exclusive access.
class HandlePool {
 public:
  /// An empty pool whose generations start at a salt of its own (from a
  /// process-wide counter; constructing pools concurrently is safe).
  HandlePool();

  /// Returns the handle of a fresh or recycled slot. No allocation in steady
  /// state (the free list and the generation array only grow).
  ProxyId allocate();
  /// Precondition: isLive(id), unchecked (a stale handle corrupts the pool).
  /// Frees the slot and bumps its generation, so `id` and every copy of it
  /// become stale.
  void release(ProxyId id);

  /// True when `id` names a live slot of this pool with its current
  /// generation. Defined for any input: false for a default, stale or
  /// out-of-range handle, and almost surely for another pool's handle.
  bool isLive(ProxyId id) const {
    return id.index < generation_.size() && live_[id.index] &&
           generation_[id.index] == id.generation;
  }
  /// Internal: isLive() without branches, for batch checks whose handles are
  /// nearly always good. Same result as isLive() for every input: an index
  /// out of range reads slot 0 (or nothing when the pool is empty) and fails.
  bool isLiveBranchFree(ProxyId id) const {
    const uint32_t n = static_cast<uint32_t>(generation_.size());
    if (n == 0) return false;
    const bool inside = id.index < n;
    const uint32_t i = inside ? id.index : 0;
    // (unsigned &: three tests, no branch.)
    return (unsigned(inside) & unsigned(live_[i] != 0) &
            unsigned(generation_[i] == id.generation)) != 0;
  }
  /// True when slot `index` holds a live proxy, whatever its generation.
  /// False for an index out of range.
  bool isLiveIndex(uint32_t index) const { return index < generation_.size() && live_[index]; }
  /// The current handle of slot `index`. Precondition: index < capacity(),
  /// unchecked. On a free slot the handle is not live.
  ProxyId handleOf(uint32_t index) const { return {index, generation_[index]}; }

  /// Slots ever allocated, live or free: every index issued is below it.
  /// Never shrinks, not even on clear().
  uint32_t capacity() const { return static_cast<uint32_t>(generation_.size()); }
  /// Internal: zero bytes after the last live flag (see liveFlags()), so that
  /// a 4-byte read at any flag stays inside the array.
  static constexpr uint32_t kLivePadding = 3;
  /// Internal: the capacity() generations, indexed by slot, for vector checks
  /// of many handles. Invalidated by allocate() and reserve().
  const uint32_t* generations() const { return generation_.data(); }
  /// Internal: capacity() live flags (1 live, 0 free) followed by
  /// kLivePadding zero bytes. Invalidated by allocate() and reserve().
  const uint8_t* liveFlags() const { return live_.data(); }
  /// Slots live now: allocated and not released.
  uint32_t liveCount() const { return liveCount_; }
  /// Heap bytes the pool holds: a generation (4) and a live flag (1) a slot,
  /// and the free list as long as the most slots free at once (none in a
  /// world that never removes), each array with its spare capacity.
  size_t memoryBytes() const {
    return generation_.capacity() * sizeof(uint32_t) + live_.capacity() +
           free_.capacity() * sizeof(uint32_t);
  }
  /// Makes room for `n` slots, so that allocate() does not allocate until
  /// capacity() reaches `n`.
  void reserve(uint32_t n);
  /// Releases every live slot at once: all their handles become stale. The
  /// slots and their generations stay, so no old handle is ever live again;
  /// the next allocations reuse the indices from 0 upward.
  void clear();

  /// Internal: the free slots; allocate() takes the last one first. With
  /// generations() and salt(), everything that decides the handles of later
  /// allocations (BroadPhase::saveState).
  const std::vector<uint32_t>& freeList() const { return free_; }
  /// Internal: the generation a slot starts at when allocate() creates it.
  uint32_t salt() const { return salt_; }
  /// Internal: replaces the pool with the one these describe: `generations`
  /// one per slot, `freeList` in allocate()'s order (every other slot live),
  /// and the salt. Precondition, unchecked (BroadPhase::loadState checks it
  /// first): the free list holds distinct indices below generations.size().
  void restore(std::vector<uint32_t> generations, std::vector<uint32_t> freeList, uint32_t salt);

  /// Checks the free list against the live flags and the live count; returns
  /// an empty string, or what is wrong. For tests and the structures'
  /// validate().
  std::string validate() const;

 private:
  std::vector<uint32_t> generation_;
  std::vector<uint8_t> live_ = std::vector<uint8_t>(kLivePadding, 0);  // capacity() + padding
  std::vector<uint32_t> free_;
  uint32_t salt_;
  uint32_t liveCount_ = 0;
};

}  // namespace bp
