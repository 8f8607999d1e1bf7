// SweepGrid proxies: add, remove, move and the accessors. Every mutation only
// records the new state of the index and queues it in dirtyList_; the cells
// are brought up to date in update() (sweep_cells.cpp).
#include <broadphase/error.h>
#include <broadphase/sweep_grid.h>

#include <cmath>
#include <string>

namespace bp {

namespace {

void requireValidBox(const Aabb& box) {
  if (!isValid(box)) throwError(ErrorCode::invalidBox, describeInvalid(box));
}

// isValid() without branches: |v| <= kMaxCoordinate is false for NaN and
// infinity too, and min <= max is false for NaN.
inline bool isValidFast(const Aabb& b) {
  const float m = kMaxCoordinate;
  return (std::fabs(b.min.x()) <= m) & (std::fabs(b.min.y()) <= m) & (std::fabs(b.min.z()) <= m) &
         (std::fabs(b.max.x()) <= m) & (std::fabs(b.max.y()) <= m) & (std::fabs(b.max.z()) <= m) &
         (b.min.x() <= b.max.x()) & (b.min.y() <= b.max.y()) & (b.min.z() <= b.max.z());
}

std::string describeHandle(ProxyId id) {
  return "handle (index " + std::to_string(id.index) + ", generation " +
         std::to_string(id.generation) + ") is not a live proxy of this SweepGrid";
}

}  // namespace

SweepGrid::SweepGrid(const SweepGridConfig& config) : config_(config) {
  if (!(config.cellSize >= 0.0f) || !std::isfinite(config.cellSize))
    throwError(ErrorCode::invalidArgument, "SweepGridConfig::cellSize must be finite and >= 0");
  if (!(config.cellSizeFactor > 0.0f) || !std::isfinite(config.cellSizeFactor))
    throwError(ErrorCode::invalidArgument, "SweepGridConfig::cellSizeFactor must be > 0");
  if (!(config.targetBoxesPerCell >= 0.0f) || !std::isfinite(config.targetBoxesPerCell))
    throwError(ErrorCode::invalidArgument, "SweepGridConfig::targetBoxesPerCell must be >= 0");
  if (!(config.cellStretchX >= 1.0f && config.cellStretchX <= 64.0f))
    throwError(ErrorCode::invalidArgument, "SweepGridConfig::cellStretchX must be in [1, 64]");
  if (config.maxCellsPerProxy == 0 || config.maxCellsPerProxy > (1u << 20))
    throwError(ErrorCode::invalidArgument,
               "SweepGridConfig::maxCellsPerProxy must be in [1, 2^20]");
}

void SweepGrid::markDirty(uint32_t index) {
  if (dirty_[index] == kDirtyNone) dirtyList_.push_back(index);
  dirty_[index] = kDirtyRelink;
}

ProxyId SweepGrid::add(const Aabb& box, bool isStatic) {
  requireValidBox(box);
  const ProxyId id = pool_.allocate();
  if (id.index >= boxes_.size()) {
    const size_t n = size_t(id.index) + 1;
    boxes_.resize(n);
    static_.resize(n, 0);
    dirty_.resize(n, 0);
    kind_.resize(n, Registration::none);
    range_.resize(n, CellRange{});
    overflowPos_.resize(n, kNullIndex);
    layer_.resize(n, kMovingLayer);
    rangeChanged_.resize(n, 0);
  }
  boxes_[id.index] = box;
  static_[id.index] = isStatic ? 1 : 0;
  markDirty(id.index);
  return id;
}

void SweepGrid::remove(ProxyId id) {
  if (!pool_.isLive(id)) throwError(ErrorCode::staleHandle, describeHandle(id));
  pool_.release(id);
  markDirty(id.index);
}

void SweepGrid::move(ProxyId id, const Aabb& box) {
  if (!pool_.isLive(id)) throwError(ErrorCode::staleHandle, describeHandle(id));
  requireValidBox(box);
  boxes_[id.index] = box;
  if (dirty_[id.index] == kDirtyNone) dirtyList_.push_back(id.index);
  dirty_[id.index] = dirtyStateFor(id.index, box);
}

void SweepGrid::move(std::span<const ProxyId> ids, std::span<const Aabb> boxes) {
  if (ids.size() != boxes.size())
    throwError(ErrorCode::invalidArgument, "move: " + std::to_string(ids.size()) + " ids but " +
                                               std::to_string(boxes.size()) + " boxes");
  // Validate everything first: a rejected batch leaves the structure untouched.
  // The fast pass only says whether something is wrong; the slow pass finds
  // the first culprit for the message.
  bool bad = false;
  for (size_t k = 0; k < ids.size(); ++k) bad |= !pool_.isLive(ids[k]) || !isValidFast(boxes[k]);
  if (bad)
    for (size_t k = 0; k < ids.size(); ++k) {
      if (!pool_.isLive(ids[k]))
        throwError(ErrorCode::staleHandle,
                   "move: entry " + std::to_string(k) + ": " + describeHandle(ids[k]));
      if (!isValid(boxes[k]))
        throwError(ErrorCode::invalidBox,
                   "move: entry " + std::to_string(k) + ": " + describeInvalid(boxes[k]));
    }
  const size_t listed = dirtyList_.size();
  dirtyList_.resize(listed + ids.size());
  uint32_t* out = dirtyList_.data() + listed;
  size_t added = 0;
  for (size_t k = 0; k < ids.size(); ++k) {
    const uint32_t i = ids[k].index;
    boxes_[i] = boxes[k];
    out[added] = i;
    added += dirty_[i] == kDirtyNone;
    dirty_[i] = dirtyStateFor(i, boxes[k]);
  }
  dirtyList_.resize(listed + added);
}

const Aabb& SweepGrid::box(uint32_t index) const {
  if (!pool_.isLiveIndex(index))
    throwError(ErrorCode::staleHandle, "box: index " + std::to_string(index) + " is not live");
  return boxes_[index];
}

bool SweepGrid::isStatic(uint32_t index) const {
  if (!pool_.isLiveIndex(index))
    throwError(ErrorCode::staleHandle, "isStatic: index " + std::to_string(index) + " is not live");
  return static_[index] != 0;
}

ProxyId SweepGrid::handleOf(uint32_t index) const {
  if (!pool_.isLiveIndex(index))
    throwError(ErrorCode::staleHandle, "handleOf: index " + std::to_string(index) + " is not live");
  return pool_.handleOf(index);
}

size_t SweepGrid::memoryBytes() const {
  size_t bytes = 0;
  auto add = [&bytes](const auto& v) { bytes += v.capacity() * sizeof(v[0]); };
  add(boxes_);
  add(static_);
  add(dirty_);
  add(kind_);
  add(range_);
  add(overflowPos_);
  add(layer_);
  add(rangeChanged_);
  add(changed_);
  add(dirtyList_);
  add(overflow_);
  add(cells_);
  add(dirtyCells_);
  add(sortScratch_);
  for (const PaddedCell& pc : cells_) {
    const SweepCell& c = pc.value;
    add(c.ids);
    add(c.keys);
    add(c.flags);
  }
  for (int w = 0; w < pairBuffers_.size(); ++w) bytes += pairBuffers_[w].memoryBytes();
  for (const CellMap& map : maps_) bytes += map.memoryBytes();
  // HandlePool: generation (4) + live (1) + free list (4) per slot.
  bytes += size_t(pool_.capacity()) * 9;
  return bytes;
}

}  // namespace bp
