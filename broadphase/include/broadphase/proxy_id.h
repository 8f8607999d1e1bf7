/// ProxyId: the handle a caller keeps for a proxy; HandlePool: where they come
/// from.
///
/// A handle is a slot index plus the generation of that slot when the handle
/// was issued. Removing a proxy bumps its slot's generation, so every copy of
/// the old handle becomes stale and is rejected. Generations of each pool
/// start at a per-pool salt, so a handle from another structure is almost
/// surely rejected too rather than silently naming some other proxy.
///
/// Slots are reused last-freed first and indices stay dense (< capacity()),
/// so per-proxy data lives in flat arrays indexed by ProxyId::index, and pairs
/// are reported as indices. A fresh pool issues 0, 1, 2, ... in order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace bp {

struct ProxyId {
  uint32_t index = UINT32_MAX;
  uint32_t generation = 0;
  friend bool operator==(const ProxyId&, const ProxyId&) = default;
};
static_assert(sizeof(ProxyId) == 8);

inline constexpr uint32_t kNullIndex = UINT32_MAX;

class HandlePool {
 public:
  HandlePool();

  /// Returns the handle of a fresh or recycled slot. No allocation in steady
  /// state (the free list and the generation array only grow).
  ProxyId allocate();
  /// Precondition: isLive(id). Bumps the slot's generation.
  void release(ProxyId id);

  bool isLive(ProxyId id) const {
    return id.index < generation_.size() && live_[id.index] &&
           generation_[id.index] == id.generation;
  }
  // isLive() without branches, for batch checks whose handles are nearly
  // always good: an index out of range reads slot 0 (or nothing when the
  // pool is empty) and fails.
  bool isLiveBranchFree(ProxyId id) const {
    const uint32_t n = static_cast<uint32_t>(generation_.size());
    if (n == 0) return false;
    const bool inside = id.index < n;
    const uint32_t i = inside ? id.index : 0;
    // (unsigned &: three tests, no branch.)
    return (unsigned(inside) & unsigned(live_[i] != 0) &
            unsigned(generation_[i] == id.generation)) != 0;
  }
  bool isLiveIndex(uint32_t index) const { return index < generation_.size() && live_[index]; }
  ProxyId handleOf(uint32_t index) const { return {index, generation_[index]}; }

  uint32_t capacity() const { return static_cast<uint32_t>(generation_.size()); }
  // The raw arrays, for vector checks of many handles (allLiveAndValid):
  // capacity() generations, and capacity() live flags (0 or 1) followed by
  // kLivePadding zero bytes, so that a dword may be read at any flag.
  static constexpr uint32_t kLivePadding = 3;
  const uint32_t* generations() const { return generation_.data(); }
  const uint8_t* liveFlags() const { return live_.data(); }
  uint32_t liveCount() const { return liveCount_; }
  void reserve(uint32_t n);
  void clear();

  /// Checks the free list against the live flags; returns an empty string or
  /// what is wrong.
  std::string validate() const;

 private:
  std::vector<uint32_t> generation_;
  std::vector<uint8_t> live_ = std::vector<uint8_t>(kLivePadding, 0);  // capacity() + padding
  std::vector<uint32_t> free_;
  uint32_t salt_;
  uint32_t liveCount_ = 0;
};

}  // namespace bp
