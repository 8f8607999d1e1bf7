/// \file
/// ProxyId: the handle a caller keeps for a proxy.
///
/// A handle is a slot index plus the generation of that slot when the handle
/// was issued. Removing a proxy bumps its slot's generation, so every copy of
/// the old handle becomes stale and is rejected. The generations of each
/// BroadPhase start at a salt of its own, so a handle from another
/// BroadPhase is almost surely rejected too rather than silently naming some
/// other proxy.
///
/// Slots are reused last-freed first and indices stay dense, so per-proxy
/// data lives in flat arrays indexed by ProxyId::index, and pairs are
/// reported as indices. A fresh BroadPhase issues 0, 1, 2, ... in order.
#pragma once

#include <cstdint>

namespace bp {

/// The handle of one proxy: 8 bytes, copied freely. Stays valid until the
/// proxy is removed; after that every copy is stale and rejected with
/// Error(staleHandle). A default ProxyId names no proxy.
struct ProxyId {
  /// The proxy's slot: dense (below the structure's slot capacity) and the
  /// number that pairs, hits and query callbacks report. kNullIndex in a
  /// default ProxyId. A removed proxy's index is reused by a later add().
  uint32_t index = UINT32_MAX;
  /// The slot's generation when the handle was issued; the handle is live
  /// while it equals the slot's current one. Wraps after 2^32 reuses of one
  /// slot, the only way a stale handle could be accepted again.
  uint32_t generation = 0;
  /// Same slot and generation: the same proxy, for handles of one structure.
  friend bool operator==(const ProxyId&, const ProxyId&) = default;
};
static_assert(sizeof(ProxyId) == 8);

/// The index that names no proxy (UINT32_MAX): that of a default ProxyId and
/// of a RayHit that missed.
inline constexpr uint32_t kNullIndex = UINT32_MAX;

}  // namespace bp
