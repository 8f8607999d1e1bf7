// Bvh: proxies (add, remove, move) and accessors. Every check comes before
// the first write, so a rejected call leaves the structure as it was.
#include "bvh/bvh.h"
#include <broadphase/error.h>

#include "common/batch_check.h"
#include "common/report_error.h"

#include <cmath>
#include <string>

namespace bp {

// A bad field is reported; when the handler returns, the field takes its
// default and the next field is checked.
Bvh::Bvh(const BvhConfig& config) : config_(config) {
  const BvhConfig defaults;
  if (!(std::isfinite(config.margin) && config.margin >= 0.0f)) {
    reportError(ErrorCode::invalidArgument,
                "BvhConfig::margin " + std::to_string(config.margin) + " must be finite and >= 0");
    config_.margin = defaults.margin;
  }
  if (!(std::isfinite(config.displacementScale) && config.displacementScale >= 0.0f)) {
    reportError(ErrorCode::invalidArgument, "BvhConfig::displacementScale " +
                                                std::to_string(config.displacementScale) +
                                                " must be finite and >= 0");
    config_.displacementScale = defaults.displacementScale;
  }
  if (!(std::isfinite(config.rebuildRatio) && config.rebuildRatio > 1.0f)) {
    reportError(ErrorCode::invalidArgument, "BvhConfig::rebuildRatio " +
                                                std::to_string(config.rebuildRatio) +
                                                " must be finite and > 1");
    config_.rebuildRatio = defaults.rebuildRatio;
  }
  tight_ = config_.margin == 0.0f &&
           (!config_.extendByDisplacement || config_.displacementScale == 0.0f);
}

bool Bvh::checkLive(ProxyId id, const char* operation) const {
  if (pool_.isLive(id)) return true;
  reportError(ErrorCode::staleHandle, std::string("Bvh::") + operation + ": handle (index " +
                                          std::to_string(id.index) + ", generation " +
                                          std::to_string(id.generation) +
                                          ") is removed, never issued or foreign");
  return false;
}

bool Bvh::checkNoPending(const char* operation) const {
  if (!pending_) return true;
  reportError(ErrorCode::invalidArgument,
              std::string("Bvh::") + operation +
                  ": the structure has pending changes; call update() or findPairs() first");
  return false;
}

void Bvh::reportDeadIndex(uint32_t index, const char* operation) const {
  reportError(ErrorCode::staleHandle, std::string("Bvh::") + operation + ": index " +
                                          std::to_string(index) + " is not live");
}

ProxyId Bvh::add(const Aabb& box, bool isStatic, uint32_t layer) {
  if (!isValid(box)) {
    reportError(ErrorCode::invalidBox, "Bvh::add: " + describeInvalid(box));
    return ProxyId{};
  }
  // Child slots reserve the top bit for the leaf tag.
  if (pool_.liveCount() >= kBvhLeafBit - 1) {
    reportError(ErrorCode::capacityExceeded, "Bvh::add: 2^31 - 1 proxies at most");
    return ProxyId{};
  }

  const ProxyId id = pool_.allocate();
  const uint32_t i = id.index;
  if (i >= exact_.size()) {
    exact_.resize(i + 1);
    if (!tight_) fat_.resize(i + 1);
    leafRef_.resize(i + 1);
    movedPos_.resize(i + 1);
    isStatic_.resize(i + 1);
    group_.resize(i + 1);
  }
  exact_[i] = box;
  // Static proxies are not expected to move: no margin, so the static tree is
  // tight (fewer false candidates against it, faster rays). A static proxy
  // that does move simply escapes its box every time.
  if (!tight_) fat_[i] = isStatic ? box : fatten(box, config_.margin);
  isStatic_[i] = isStatic ? 1 : 0;
  group_[i] = uint8_t(2 * layer + (isStatic ? 1 : 0));
  layeredProxies_ += layer != 0;
  if (trees_.size() < 2 * size_t(layer) + 2) trees_.resize(2 * size_t(layer) + 2);
  movedPos_[i] = kNullIndex;
  BvhTree& tree = treeOf(i);
  leafRef_[i] = kPendingInsert | static_cast<uint32_t>(tree.pendingInserts.size());
  tree.pendingInserts.push_back(i);
  pending_ = true;
  return id;
}

void Bvh::remove(ProxyId id) {
  if (!checkLive(id, "remove")) return;
  const uint32_t i = id.index;
  BvhTree& tree = treeOf(i);
  if (leafRef_[i] & kPendingInsert) {
    const uint32_t position = leafRef_[i] & ~kPendingInsert;
    const uint32_t last = tree.pendingInserts.back();
    tree.pendingInserts[position] = last;
    leafRef_[last] = kPendingInsert | position;
    tree.pendingInserts.pop_back();
  } else {
    if (movedPos_[i] != kNullIndex) {
      const uint32_t position = movedPos_[i];
      const uint32_t last = tree.moved.back();
      tree.moved[position] = last;
      movedPos_[last] = position;
      tree.moved.pop_back();
    }
    removeLeaf(tree, i);
  }
  movedPos_[i] = kNullIndex;
  leafRef_[i] = kNullIndex;
  layeredProxies_ -= group_[i] >= 2;
  pool_.release(id);
  pending_ = true;
}

// Branch-free: on scenes where every box moves, the signs of the motion and
// the teleport test are random, and branches on them mispredicted half the time.
Aabb Bvh::fatBoxAfterMove(const Aabb& oldBox, const Aabb& newBox) const {
  Aabb fat = fatten(newBox, config_.margin);
  if (!config_.extendByDisplacement) return fat;
  const Eigen::Array3f d = (newBox.min - oldBox.min).array();
  const Eigen::Array3f size = newBox.extent().array();
  // A jump longer than the box plus the margin is a teleport, not motion.
  const bool teleport = (d.abs() > size + 2.0f * config_.margin).any();
  const Eigen::Array3f stretch = (teleport ? 0.0f : config_.displacementScale) * d;
  fat.max.array() += stretch.max(0.0f);
  fat.min.array() += stretch.min(0.0f);
  return fat;
}

void Bvh::applyMove(uint32_t i, const Aabb& box) {
  pending_ = true;
  if (tight_) {  // every move, even a shrink, rewrites the slot
    exact_[i] = box;
  } else {
    const Aabb old = exact_[i];
    exact_[i] = box;
    if (bp::contains(fat_[i], box)) return;  // the tree is untouched
    fat_[i] = isStatic_[i] ? box : fatBoxAfterMove(old, box);
  }
  if (leafRef_[i] & kPendingInsert) return;  // the insert will read leafBox()
  if (movedPos_[i] == kNullIndex) {
    BvhTree& tree = treeOf(i);
    movedPos_[i] = static_cast<uint32_t>(tree.moved.size());
    tree.moved.push_back(i);
  }
}

void Bvh::move(ProxyId id, const Aabb& box) {
  if (!checkLive(id, "move")) return;
  if (!isValid(box)) {
    reportError(ErrorCode::invalidBox, "Bvh::move: " + describeInvalid(box));
    return;
  }
  applyMove(id.index, box);
}

// Validates the whole batch first (a rejected batch changes nothing), with
// the error paths out of the loop: a frame of the standard scenes moves every
// proxy, so this loop is a tenth of it.
void Bvh::move(std::span<const ProxyId> ids, std::span<const Aabb> boxes) {
  if (ids.size() != boxes.size()) {
    reportError(ErrorCode::invalidArgument, "Bvh::move: " + std::to_string(ids.size()) +
                                                " ids but " + std::to_string(boxes.size()) +
                                                " boxes");
    return;
  }
  if (!allLiveAndValid(pool_, ids, boxes, 0, ids.size())) {
    for (size_t k = 0; k < ids.size(); ++k) {
      if (!checkLive(ids[k], ("move: entry " + std::to_string(k)).c_str())) return;
      if (!isValid(boxes[k])) {
        reportError(ErrorCode::invalidBox,
                    "Bvh::move: entry " + std::to_string(k) + ": " + describeInvalid(boxes[k]));
        return;
      }
    }
  }
  if (!tight_) {
    for (size_t k = 0; k < ids.size(); ++k) applyMove(ids[k].index, boxes[k]);
    return;
  }
  // applyMove() for tight mode, with the loop-invariant parts hoisted: the
  // whole frame's moves go through here on the standard scenes.
  pending_ = true;
  Aabb* exact = exact_.data();
  const uint32_t* leafRef = leafRef_.data();
  uint32_t* movedPos = movedPos_.data();
  const uint8_t* group = group_.data();
  for (size_t k = 0; k < ids.size(); ++k) {
    const uint32_t i = ids[k].index;
    exact[i] = boxes[k];
    if ((leafRef[i] & kPendingInsert) || movedPos[i] != kNullIndex) continue;
    std::vector<uint32_t>& moved = trees_[group[i]].moved;
    movedPos[i] = static_cast<uint32_t>(moved.size());
    moved.push_back(i);
  }
}

const Aabb& Bvh::box(uint32_t index) const {
  if (!pool_.isLiveIndex(index)) {
    reportDeadIndex(index, "box");
    static const Aabb kNoBox = Aabb::empty();  // initialised here, off the path that succeeds
    return kNoBox;
  }
  return exact_[index];
}

bool Bvh::isStatic(uint32_t index) const {
  if (!pool_.isLiveIndex(index)) {
    reportDeadIndex(index, "isStatic");
    return false;
  }
  return isStatic_[index] != 0;
}

ProxyId Bvh::handleOf(uint32_t index) const {
  if (!pool_.isLiveIndex(index)) {
    reportDeadIndex(index, "handleOf");
    return ProxyId{};
  }
  return pool_.handleOf(index);
}

BvhTreeStats Bvh::statsOf(const BvhTree& tree) const {
  BvhTreeStats s;
  s.leaves = tree.leafCount;
  s.nodes = static_cast<uint32_t>(tree.nodes.size() - tree.freeNodes.size());
  s.cost = tree.cost;
  s.costAtBuild = tree.costAtBuild;
  s.rebuildCount = tree.rebuildCount;
  return s;
}

size_t Bvh::memoryBytes() const {
  auto bytes = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  size_t total = bytes(exact_) + bytes(fat_) + bytes(leafRef_) + bytes(movedPos_) +
                 bytes(isStatic_) + bytes(scratchTop_) + bytes(scratchFrontier_) +
                 bytes(bucketStart_) + bytes(bucketCursor_) + bytes(scratchPairs_);
  total += pool_.memoryBytes();
  total += bytes(group_);
  for (const BvhTree* t = trees_.data(); t != trees_.data() + trees_.size(); ++t)
    total += bytes(t->nodes) + bytes(t->freeNodes) + bytes(t->pendingInserts) + bytes(t->moved) +
             bytes(t->dirtyNodes) + bytes(t->wide) + bytes(t->wideSlot);
  for (int w = 0; w < pairBuffers_.size(); ++w) total += bytes(pairBuffers_[w]);
  return total;
}

size_t Bvh::pairBytes() const {
  auto bytes = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  size_t total = bytes(bucketStart_) + bytes(bucketCursor_) + bytes(scratchPairs_);
  for (int w = 0; w < pairBuffers_.size(); ++w) total += bytes(pairBuffers_[w]);
  return total;
}

}  // namespace bp
