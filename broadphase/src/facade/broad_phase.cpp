// BroadPhase::Impl: its construction, the order of update()'s steps, origin
// shifts and validate(). The steps live by what they own: the change log
// (proxy_changes.cpp), the frame's pairs and events (frame_pairs.cpp), the
// queries (broad_phase_query.cpp), snapshots (broad_phase_state.cpp), the
// double path (broad_phase_double.cpp), layers (broad_phase_layers.cpp).
#include "facade/broad_phase_impl.h"

#include "common/assert.h"
#include "common/batch_check.h"
#include "common/even_chunks.h"
#include "common/grow.h"
#include "common/report_error.h"
#include "facade/broad_phase_side.h"
#include "facade/double_world.h"
#include "facade/layer_check.h"
#include "facade/query_view.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstring>
#include <optional>
#include <string>
#include <utility>

namespace bp {

namespace {

// The message of update()'s capacityExceeded.
std::string overMaxPairs(uint64_t maxPairs) {
  return "update: the frame has more than maxPairs = " + std::to_string(maxPairs) + " pairs";
}

}  // namespace

// A bad field is reported; when the handler returns, the field takes its
// default and the next field is checked.
BroadPhase::Impl::Impl(const BroadPhaseConfig& config) : config_(config) {
  const BroadPhaseConfig defaults;
  if (config.arena == nullptr && config.threads < 0) {
    reportError(ErrorCode::invalidArgument,
                "thread count " + std::to_string(config.threads) + " is negative (0 = all cores)");
    config_.threads = defaults.threads;
  }
  if (!(config.margin >= 0.0f) || !std::isfinite(config.margin)) {
    reportError(ErrorCode::invalidArgument,
                "margin " + std::to_string(config.margin) + " must be finite and >= 0");
    config_.margin = defaults.margin;
  }
  if (!(config.cellSize >= 0.0f) || !std::isfinite(config.cellSize)) {
    reportError(ErrorCode::invalidArgument,
                "cell size " + std::to_string(config.cellSize) + " must be finite and >= 0");
    config_.cellSize = defaults.cellSize;
  }
  if (config.structure != Structure::bvh && config.structure != Structure::sweep &&
      config.structure != Structure::automatic) {
    reportError(ErrorCode::invalidArgument,
                "unknown structure " + std::to_string(int(config.structure)));
    config_.structure = defaults.structure;
  }
  if (!config.layers.symmetric()) {
    reportError(ErrorCode::invalidArgument,
                "BroadPhaseConfig::layers: " + asymmetryOf(config.layers));
    config_.layers = defaults.layers;
  }
  scheduler_ = config_.arena ? std::make_unique<Scheduler>(*config_.arena)
                             : std::make_unique<Scheduler>(config_.threads);
  structure_ = makeStructure();
  if (config_.concurrentQueries) view_ = std::make_unique<QueryView>(makeStructure());
}

// `automatic` is the sweep: measured fastest for a frame's pairs on every
// standard scene and on static/moving mixes, since statics sit in cells of
// their own that a frame never re-sorts (figures and how they were measured:
// docs/threading.md, "automatic").
std::unique_ptr<BroadPhase::Impl::Side> BroadPhase::Impl::makeStructure() const {
  return config_.structure == Structure::bvh ? Side::makeBvh(config_) : Side::makeSweep(config_);
}

BroadPhase::Impl::~Impl() = default;

void BroadPhase::Impl::rebuild() {
  applyPending();
  structure_ = makeStructure();
  for (uint32_t i = 0; i < rules_.size(); ++i) {
    if (!pool_.isLiveIndex(i)) continue;
    slot_[i] =
        structure_->add(boxes_[i], rules_[i].motion == MotionType::staticBody, rules_[i].layer, i)
            .index;
    state_[i] = kInStructure;
  }
}

const FramePairs& BroadPhase::Impl::update() {
  applyPending();
  std::swap(previous_, pairs_);
  if (!findStructurePairs()) {
    pairs_.clear();
    std::swap(previous_, pairs_);  // keep the last frame's pairs as they were
    if (view_) view_->publish(*this);
    reportError(ErrorCode::capacityExceeded, overMaxPairs(config_.maxPairs));
    return frame_;
  }
  // The last frame had no pair (the first update, usually): every pair
  // begins and none ends, and the begun list is the pair list itself, not a
  // copy (on `clustered` 10^6 a copy was 0.7 GB, see docs/decisions.md).
  const bool allBegin = previous_.empty();
  if (allBegin) {
    clearEvents();
    collectPairs(pairs_);
    finishEvents();
  } else if (structure_->remapped == 0 && (special_ == 0 || onlyDoubleSpecial())) {
    if (special_ != 0) dropInexactPairs();
    mergePairsAndEvents();
  } else {
    collectPairs(pairs_);
    computeEvents();
  }
  readySpareList();
  frame_ = {pairs_, allBegin ? pairs_ : begun_, ended_};
  if (view_) view_->publish(*this);
  return frame_;
}

void BroadPhase::Impl::update(FunctionRef<void(std::span<const ProxyPair>)> consume) {
  // Reuses the merged path's parallel stages but hands each worker's chunk
  // straight to the consumer instead of merging.
  applyPending();
  if (!findStructurePairs()) {  // over maxPairs: reported before `consume` sees a pair
    if (view_) view_->publish(*this);
    reportError(ErrorCode::capacityExceeded, overMaxPairs(config_.maxPairs));
    return;
  }
  streamPairs(consume);
  previous_.clear();
  pairs_.clear();
  begun_.clear();
  ended_.clear();
  for (uint32_t r : renewedList_) renewed_[r] = 0;
  renewedList_.clear();
  frame_ = {};
  if (view_) view_->publish(*this);
}

// --- Large worlds -------------------------------------------------------------

void BroadPhase::Impl::shiftOrigin(const Vec3& offset) {
  if (!isFinite(offset)) {
    reportError(ErrorCode::invalidArgument, "shiftOrigin: offset is not finite");
    return;
  }
  // Validate every shifted box before changing anything.
  for (uint32_t i = 0; i < rules_.size(); ++i) {
    if (!pool_.isLiveIndex(i) || isDoubleProxy(i)) continue;  // double ones: checkDoubleShift
    const Aabb shifted{boxes_[i].min - offset, boxes_[i].max - offset};
    if (!isValid(shifted)) {
      reportError(ErrorCode::invalidBox, "shiftOrigin: proxy " + std::to_string(i) +
                                             " would become " + describeInvalid(shifted));
      return;
    }
  }
  if (!checkDoubleShift(offset)) return;
  applyPending();
  for (uint32_t i = 0; i < rules_.size(); ++i)
    if (pool_.isLiveIndex(i) && !isDoubleProxy(i))
      boxes_[i] = {boxes_[i].min - offset, boxes_[i].max - offset};
  applyDoubleShift(offset);
  // Rebuild the structures from scratch: a shift is rare, and a fresh build
  // gives the trees their best quality in the new frame. Then update the
  // structure (not its pairs), so that queries answer at once.
  rebuild();
  structure_->update(*scheduler_);
  if (view_) view_->rebuild(*this);
}

// --- Introspection ------------------------------------------------------------

std::string BroadPhase::Impl::validate() const {
  if (std::string e = pool_.validate(); !e.empty()) return "handle pool: " + e;
  if (std::string e = structure_->validate(); !e.empty()) return "structure: " + e;
  std::vector<uint32_t> filterSlots;
  for (uint32_t i = 0; i < rules_.size(); ++i) {
    if (!pool_.isLiveIndex(i)) {
      if (rules_[i].filterSlot != kDefaultFilter)
        return "removed proxy " + std::to_string(i) + " still holds a filter slot";
      continue;
    }
    filterSlots.push_back(rules_[i].filterSlot);
    if (!isValid(boxes_[i])) return "proxy " + std::to_string(i) + " holds an invalid box";
    if (state_[i] & kPendingAdd) continue;
    const Side& side = *structure_;
    if (slot_[i] >= side.outer.size() || side.outer[slot_[i]] == kNullIndex)
      return "proxy " + std::to_string(i) + " is missing from its structure";
    if (side.outer[slot_[i]] != i)
      return "proxy " + std::to_string(i) + " maps to a structure slot that maps elsewhere";
  }
  if (std::string e = filters_.validate(filterSlots); !e.empty()) return "filters: " + e;
  if (movesUnmarked_) {
    for (size_t k = 0; k < pendingMoves_.size(); ++k) {
      const uint32_t i = pendingMoves_[k];
      if (state_[i] != kInStructure)
        return "proxy " + std::to_string(i) + " is in the unmarked pending list but is not " +
               "in its structure with nothing pending";
      if (k > 0 && pendingMoves_[k - 1] >= i)
        return "the unmarked pending list does not strictly increase at entry " + std::to_string(k);
    }
  } else if (!movesDropped_) {
    for (const uint32_t i : pendingMoves_)
      if (!(state_[i] & kPendingMove))
        return "proxy " + std::to_string(i) + " is listed as a pending move but is not one";
  }
  uint32_t remapped = 0;
  for (uint32_t slot = 0; slot < structure_->outer.size(); ++slot)
    remapped += structure_->outer[slot] != kNullIndex && structure_->outer[slot] != slot;
  if (remapped != structure_->remapped)
    return "the structure counts " + std::to_string(structure_->remapped) +
           " slots mapped to other indices, but " + std::to_string(remapped) + " are";
  if (std::string e = validateDouble(); !e.empty()) return e;
  const uint32_t inStructures = structure_->proxyCount();
  uint32_t waiting = 0;
  for (uint32_t i = 0; i < state_.size(); ++i) waiting += (state_[i] & kPendingAdd) != 0;
  if (inStructures + waiting != pool_.liveCount() + pendingRemoves_.size())
    return "structures hold " + std::to_string(inStructures) + " proxies, expected " +
           std::to_string(pool_.liveCount() + pendingRemoves_.size() - waiting);
  if (view_) return view_->validate(*this);
  return {};
}

MemoryUse BroadPhase::Impl::memoryUse() const {
  auto bytes = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  MemoryUse m;
  const Side& side = *structure_;
  m.structure = side.structureBytes();
  m.rayTree = side.rays.tree.memoryBytes();
  m.proxies = sizeof(Impl) + bytes(boxes_) + bytes(userData_) + bytes(rules_) + bytes(slot_) +
              bytes(state_) + bytes(renewed_) + pool_.memoryBytes() + filters_.memoryBytes();
  m.changes = bytes(pendingAdds_) + bytes(pendingMoves_) + bytes(pendingRemoves_) +
              bytes(appliedMoves_) + bytes(moveIds_) + bytes(moveBoxes_) + bytes(chunkAscending_) +
              bytes(chunkCount_) + bytes(renewedList_);
  m.pairs = side.pairBytes() + bytes(pairs_) + bytes(previous_);
  m.events = bytes(begun_) + bytes(ended_) + bytes(eventChunks_);
  for (const EventChunk& e : eventChunks_) m.events += bytes(e.begun) + bytes(e.ended);
  if (dworld_) m.doubles = sizeof(DoubleWorld) + dworld_->memoryBytes();
  if (view_) {  // a query may be catching up in it: read it as a query does
    const QueryRead hold(*this);
    m.queryView = view_->memoryBytes();
  }
  return m;
}

}  // namespace bp
