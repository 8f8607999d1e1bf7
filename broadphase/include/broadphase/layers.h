/// \file
/// Broadphase layers: a coarse collision rule that the structures apply
/// while they look for pairs, so that two layers that never collide cost no
/// candidate test at all (the category/mask Filter of broad_phase.h is the
/// fine rule on top, applied to the pairs the structure found).
///
///   bp::LayerTable table;                  // every layer collides with every layer
///   table.set(kDebris, kDebris, false);    // debris does not collide with itself
///   table.set(kDebris, kSensors, false);   // nor with sensors (and sensors not with debris)
///   bp::BroadPhase broadphase({.layers = table});
///   broadphase.add({.box = box, .layer = kDebris});
///
/// Each proxy is in one layer (ProxyDesc::layer, BroadPhase::setLayer). The
/// structures keep each layer apart (the sweep's cells and the BVH's trees
/// are per layer, and per motion type as before) and sweep or walk a layer
/// against itself only when the table lets it collide with itself, and two
/// layers against each other only when the table lets them collide.
#pragma once

#include <cstdint>

namespace bp {

/// How many broadphase layers there are: a layer is 0 .. kMaxLayers - 1.
inline constexpr uint32_t kMaxLayers = 32;

/// Which layers collide with which: a symmetric kMaxLayers x kMaxLayers
/// table of bits. The default lets every layer collide with every layer
/// (then layers change nothing). Plain data: `rows` may be written directly,
/// and BroadPhase rejects a table whose rows are not symmetric
/// (invalidArgument; see symmetric()).
struct LayerTable {
  /// Bit b of rows[a]: layers a and b collide.
  uint32_t rows[kMaxLayers];

  /// Every layer collides with every layer.
  constexpr LayerTable() {
    for (uint32_t& r : rows) r = ~uint32_t(0);
  }
  /// A table where no layer collides with any (to be opened with set()).
  static constexpr LayerTable none() {
    LayerTable t;
    for (uint32_t& r : t.rows) r = 0;
    return t;
  }
  /// Whether layers a and b collide. Precondition: both < kMaxLayers.
  constexpr bool collides(uint32_t a, uint32_t b) const { return (rows[a] >> b) & 1u; }
  /// Sets whether layers a and b collide, both ways (a == b: the layer with
  /// itself). Precondition: both < kMaxLayers.
  constexpr void set(uint32_t a, uint32_t b, bool collide) {
    if (collide) {
      rows[a] |= uint32_t(1) << b;
      rows[b] |= uint32_t(1) << a;
    } else {
      rows[a] &= ~(uint32_t(1) << b);
      rows[b] &= ~(uint32_t(1) << a);
    }
  }
  /// Whether collides(a, b) == collides(b, a) for every a and b.
  constexpr bool symmetric() const {
    for (uint32_t a = 0; a < kMaxLayers; ++a)
      for (uint32_t b = a + 1; b < kMaxLayers; ++b)
        if (collides(a, b) != collides(b, a)) return false;
    return true;
  }
  /// The same bits.
  friend constexpr bool operator==(const LayerTable& x, const LayerTable& y) {
    for (uint32_t a = 0; a < kMaxLayers; ++a)
      if (x.rows[a] != y.rows[a]) return false;
    return true;
  }
};

}  // namespace bp
