// The messages of the layer checks that BroadPhase's constructor, add(),
// setLayer() and setLayerTable() share (broad_phase_layers.cpp).
#pragma once

#include <broadphase/layers.h>

#include <cstdint>
#include <string>

namespace bp {

// "layer N is out of range ...", for a layer >= kMaxLayers.
std::string layerOutOfRange(uint32_t layer);
// Names the first entry of a table that is not symmetric.
std::string asymmetryOf(const LayerTable& table);

}  // namespace bp
