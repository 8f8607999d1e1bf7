// Helpers shared by the MPI tests: the world's rank and size, gathering every
// rank's share of a frame, and Model, one BroadPhase over every proxy that
// the distributed results must equal.
#pragma once

#include <broadphase/broad_phase.h>
#include <broadphase/mpi/distributed_broad_phase.h>

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace bp::mpi::test {

int worldRank();
int worldSize();

/// Every rank's pairs, concatenated and sorted by pairBefore, on every rank.
std::vector<GlobalPair> allGather(std::span<const GlobalPair> mine);

/// A frame as one list per kind, sorted: the union over ranks of a
/// GlobalFrame, or the Model's frame.
struct Frame {
  std::vector<GlobalPair> pairs, begun, ended;
};
Frame allGather(const GlobalFrame& mine);

/// True on every rank when `ok` is true on every rank.
bool allRanks(bool ok);

/// bp::hashPairs of the pairs' ids (which must fit in 32 bits): the hash of
/// the reference data.
uint64_t hashIds(const std::vector<GlobalPair>& pairs);

/// Gtest assertion that two sorted pair lists are equal, user data
/// included, printing the first differences.
::testing::AssertionResult samePairs(const std::vector<GlobalPair>& expected,
                                     const std::vector<GlobalPair>& actual);

/// One BroadPhase over every proxy, addressed by global id: what the
/// distributed world must report. Removals are applied just before
/// update(), after the adds, so that no slot freed this frame is reused
/// before the frame's ended pairs are mapped back to ids.
class Model {
 public:
  explicit Model(const BroadPhaseConfig& config = {}) : bp_(config) {}
  void add(uint64_t id, const ProxyDesc& desc);
  void remove(uint64_t id) { removes_.push_back(id); }
  void move(uint64_t id, const Aabb& box) { bp_.move(handles_.at(id), box); }
  void setFilter(uint64_t id, const Filter& f) { bp_.setFilter(handles_.at(id), f); }
  void setUserData(uint64_t id, uint64_t u) { bp_.setUserData(handles_.at(id), u); }
  void setMotionType(uint64_t id, MotionType m) { bp_.setMotionType(handles_.at(id), m); }
  bool contains(uint64_t id) const { return handles_.count(id) != 0; }
  ProxyDesc desc(uint64_t id) const { return bp_.desc(handles_.at(id)); }
  Frame update();
  BroadPhase& broadPhase() { return bp_; }
  /// The global id of a local index (a query result).
  uint64_t idOf(uint32_t index) const { return ids_[index]; }

 private:
  std::vector<GlobalPair> toGlobal(std::span<const ProxyPair> pairs) const;
  BroadPhase bp_;
  std::unordered_map<uint64_t, ProxyId> handles_;
  std::vector<uint64_t> ids_;  // by index
  std::vector<uint64_t> removes_;
};

}  // namespace bp::mpi::test
