// BroadPhase's broadphase layers: setLayer, setLayerTable and their checks.
// The structures keep the layers apart (sweep_layers.cpp, bvh_layers.cpp);
// the facade only validates, records, and hands the table over.
#include "facade/broad_phase_impl.h"

#include "common/report_error.h"
#include "facade/broad_phase_side.h"
#include "facade/layer_check.h"

#include <string>

namespace bp {

std::string layerOutOfRange(uint32_t layer) {
  return "layer " + std::to_string(layer) + " is out of range (layers are 0 to " +
         std::to_string(kMaxLayers - 1) + ")";
}

std::string asymmetryOf(const LayerTable& table) {
  for (uint32_t a = 0; a < kMaxLayers; ++a)
    for (uint32_t b = a + 1; b < kMaxLayers; ++b)
      if (table.collides(a, b) != table.collides(b, a))
        return "the layer table is not symmetric: layer " + std::to_string(a) +
               (table.collides(a, b) ? " collides" : " does not collide") + " with layer " +
               std::to_string(b) + " but not the other way round";
  return {};
}

void BroadPhase::Impl::setLayer(ProxyId id, uint32_t layer) {
  if (!checkLive(id, "setLayer")) return;
  if (layer >= kMaxLayers) {
    reportError(ErrorCode::invalidArgument, "setLayer: " + layerOutOfRange(layer));
    return;
  }
  const uint32_t i = id.index;
  Rules& r = rules_[i];
  if (r.layer == layer) return;
  r.layer = uint8_t(layer);
  // The structures keep layers apart (cells or trees of their own), so the
  // proxy leaves its part and enters the new layer's at the next update, as
  // setMotionType() moves a proxy between static and moving: not a remove,
  // so its index and standing pairs stay. A pending add takes the new layer.
  if (state_[i] & kPendingAdd) return;
  dropIfListed(i);
  pendingRemoves_.push_back(structure_->handleOf(slot_[i]));
  state_[i] = kPendingAdd | kRehome;
  pendingAdds_.push_back(i);
}

void BroadPhase::Impl::setLayerTable(const LayerTable& table) {
  if (!table.symmetric()) {
    reportError(ErrorCode::invalidArgument, "setLayerTable: " + asymmetryOf(table));
    return;
  }
  // The structures read the table only when they look for pairs, i.e. in
  // the next update(); the cells and trees do not depend on it.
  config_.layers = table;
  structure_->visit([&](auto& s) { s.setLayerTable(table); });
}

uint64_t BroadPhase::Impl::lastStructurePairs() const { return structure_->pairs.size(); }

}  // namespace bp
