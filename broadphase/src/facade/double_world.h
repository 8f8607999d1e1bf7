// BroadPhase::Impl::DoubleWorld: what the double path adds to the facade. The
// world position of the float frame's zero, and per proxy index the exact
// DAabb of double proxies: as last given (pending, what move() wrote) and as
// of the last update() (applied, what queries and pairs test, so that a
// query never sees a half-applied frame). Allocated on first use; the
// DAabbs in pages (common/paged_array.h), made where double proxies are, so
// that the first double proxy of a large float world costs one page.
//
// The two DAabbs of a proxy are its entries in two slot arrays, and its
// flag byte says which slot is applied and whether the other holds a
// pending box: update() applies a moved proxy by flipping two bits, not by
// copying 48 bytes (docs/decisions/double.md). The query view's copy
// (publish()) holds the applied DAabbs alone, in slot 0.
#pragma once

#include "common/paged_array.h"
#include "facade/broad_phase_impl.h"

#include <vector>

namespace bp {

struct BroadPhase::Impl::DoubleWorld {
  /// A proxy index's flag byte: kDouble for a double proxy; kAppliedSlot,
  /// the slot of its applied DAabb; kPendingOther, a move (or its add)
  /// wrote the other slot since the last update(). Invariant: a byte
  /// without kDouble is 0, and kPendingOther is set only on a proxy whose
  /// add or move is pending.
  enum : uint8_t { kDouble = 1, kAppliedSlot = 2, kPendingOther = 4 };

  DVec3 origin;                  // the sum of the shiftOrigin() offsets
  PagedArray<DAabb> slots[2];    // by proxy index, meaningful where kDouble
  PagedArray<uint8_t> flags;     // by proxy index
  uint32_t count = 0;            // live double proxies
  std::vector<Aabb> frameBoxes;  // move()'s batch: each entry's float box, rounded once

  bool has(uint32_t i) const {
    const uint8_t* flag = flags.find(i);
    return flag != nullptr && (*flag & kDouble) != 0;
  }
  static uint32_t appliedSlot(uint8_t f) { return (f >> 1) & 1u; }
  static uint32_t pendingSlot(uint8_t f) { return ((f >> 1) ^ (f >> 2)) & 1u; }
  /// The DAabb as of the last update() (of a double proxy: has(i)).
  const DAabb& applied(uint32_t i) const { return slots[appliedSlot(flags[i])][i]; }
  /// The DAabb as last given.
  const DAabb& pending(uint32_t i) const { return slots[pendingSlot(flags[i])][i]; }
  /// A move of double proxy i: `box` becomes its pending DAabb.
  void setPending(uint32_t i, const DAabb& box) {
    uint8_t& f = flags[i];
    f = uint8_t(f | kPendingOther);
    slots[appliedSlot(f) ^ 1u][i] = box;
  }
  /// update() of double proxy i: its pending DAabb becomes the applied one.
  void apply(uint32_t i) {
    uint8_t& f = flags[i];
    if (f & kPendingOther) f = uint8_t(f ^ (kAppliedSlot | kPendingOther));
  }
  /// Index i becomes a double proxy whose add is pending with `box`.
  void mark(uint32_t i, const DAabb& box) {
    reserveIndex(i);
    flags[i] = kDouble;
    setPending(i, box);
  }
  /// Index i becomes a double proxy with `box` applied and nothing pending.
  void markApplied(uint32_t i, const DAabb& box) {
    reserveIndex(i);
    flags[i] = kDouble;
    slots[0][i] = box;
  }
  void forget(uint32_t i) { flags[i] = 0; }
  /// The query view's copy: index i as `writer` has it applied (a double
  /// proxy's applied DAabb in slot 0, or no double proxy), its pages made
  /// as needed (slot 1's never).
  void publish(const DoubleWorld& writer, uint32_t i) {
    const bool isDouble = writer.has(i);
    flags.at(i) = isDouble ? kDouble : 0;
    if (isDouble) slots[0].at(i) = writer.applied(i);
  }
  /// Calls fn(i) for every double proxy index, in ascending order.
  template <class Fn>
  void forEachDouble(Fn&& fn) const {
    flags.forEachMade([&](uint32_t i, uint8_t flag) {
      if (flag & kDouble) fn(i);
    });
  }
  /// Makes index i's pages (its entries can be written).
  void reserveIndex(uint32_t i) {
    slots[0].at(i);
    slots[1].at(i);
    flags.at(i);
  }
  size_t memoryBytes() const {
    return slots[0].memoryBytes() + slots[1].memoryBytes() + flags.memoryBytes() +
           frameBoxes.capacity() * sizeof(Aabb);
  }
};

}  // namespace bp
