// DistributedBroadPhase's per-frame buffers. Kept across frames so that a
// steady-state update() reuses their capacity instead of allocating.
#pragma once

#include <broadphase/mpi/distributed_broad_phase.h>

#include "exchange.h"

#include <utility>
#include <vector>

namespace bp::mpi {

struct DistributedBroadPhase::Scratch {
  explicit Scratch(int size)
      : directory(size),
        migrate(size),
        ghosts(size),
        pairs(size),
        queries(size),
        validation(size) {}

  // One exchange per phase, so that each keeps buffers sized for its traffic.
  detail::Exchange directory, migrate, ghosts, pairs, queries, validation;

  /// A proxy that became owned here this frame: its local index, the rank it
  /// came from, and (when it had an owner before) the box its old owner's
  /// ghosts were placed by.
  struct Arrival {
    uint32_t index;
    int from;
    bool hasOld;
    Aabb oldBox;
  };
  std::vector<Arrival> arrivals;
  /// Per local index, what the pair loop needs: id, owner, and whether the
  /// box lies inside this rank's region.
  struct PairInfo {
    uint64_t id;
    int32_t owner;
    uint32_t inside;
  };
  std::vector<PairInfo> info;
  std::vector<uint32_t> departing;  ///< local indices sent away this frame
  std::vector<uint64_t> departedIds;
  std::vector<GlobalPair> current;    ///< this frame's pairs whose lower id is owned here
  std::vector<GlobalPair> historyIn;  ///< the history that came with arrivals
  std::vector<int> targets, oldTargets;
  std::vector<ProxyId> moveHandles;  ///< one batch of moves for the rank's BroadPhase
  std::vector<Aabb> moveBoxes;
  std::vector<int64_t> counts;
  std::vector<uint64_t> removedIds;
  std::vector<std::pair<uint64_t, int>> addedIds;  ///< (id, adding rank)
  std::vector<Vec3> centres;
  std::vector<std::byte> bytes;
};

}  // namespace bp::mpi
