/// \file
/// Decomposition: space cut into one region per rank by recursive coordinate
/// bisection. Pure geometry, no MPI: every rank holds the same copy and
/// answers ownership and halo questions without asking anyone.
#pragma once

#include <broadphase/math/aabb.h>

#include <cstdint>
#include <span>
#include <vector>

namespace bp::mpi {

/// One rank's region: the points p with lo <= p < hi on every axis. Half-open,
/// so the regions of a Decomposition tile space with no point in two of them;
/// the outer faces are at -infinity and +infinity, so every point has a region.
struct Region {
  Vec3 lo;  ///< lower corner, inclusive; -infinity on an outer face
  Vec3 hi;  ///< upper corner, exclusive; +infinity on an outer face

  /// True when the point lies in the region (lo <= p < hi on every axis).
  bool contains(const Vec3& p) const {
    return int(lo.x() <= p.x()) & int(p.x() < hi.x()) & int(lo.y() <= p.y()) & int(p.y() < hi.y()) &
           int(lo.z() <= p.z()) & int(p.z() < hi.z());
  }
  /// True when the closed box lies inside the region (so it touches no other
  /// region of the same Decomposition).
  bool encloses(const Aabb& box) const {
    return int(lo.x() <= box.min.x()) & int(box.max.x() < hi.x()) & int(lo.y() <= box.min.y()) &
           int(box.max.y() < hi.y()) & int(lo.z() <= box.min.z()) & int(box.max.z() < hi.z());
  }
  /// True when the closed box shares a point with the region.
  bool touches(const Aabb& box) const {
    return int(box.min.x() < hi.x()) & int(lo.x() <= box.max.x()) & int(box.min.y() < hi.y()) &
           int(lo.y() <= box.max.y()) & int(box.min.z() < hi.z()) & int(lo.z() <= box.max.z());
  }
};

/// A binary tree over the ranks: a node holding ranks [r0, r1) cuts its
/// region at `split` along one axis; points with p[axis] < split go to the
/// first (r1 - r0) / 2 ranks, the others to the rest. The leaves are the
/// ranks' regions. Built from the same input on every rank, the trees are
/// identical bit for bit, so every rank computes the same owner for a point.
class Decomposition {
 public:
  /// `ranks` regions (at least 1), every cut at 0 along x, y, z in turn: a
  /// placeholder until build() has points to balance.
  explicit Decomposition(int ranks = 1);

  /// Balances the regions over weighted points (typically box centres, each
  /// weight the number of boxes it stands for): each node's cut puts on
  /// either side a share of the weight as close as the points allow to that
  /// side's share of the ranks. The cut axis is the one along which the
  /// node's points spread widest. Points with equal coordinates cannot be
  /// separated, so a cluster of identical centres stays on one side. The
  /// result depends only on the points' values and order.
  /// Preconditions: finite points, weights.size() == points.size(), ranks >= 1.
  static Decomposition build(int ranks, std::span<const Vec3> points,
                             std::span<const double> weights);

  /// The number of regions.
  int ranks() const { return ranks_; }
  /// The rank whose region holds the point (one tree walk, log2(ranks) steps).
  int ownerOf(const Vec3& point) const;
  /// Every rank whose region the closed box touches, ascending, into `out`
  /// (cleared first).
  void ranksTouching(const Aabb& box, std::vector<int>& out) const;
  /// The region of a rank in [0, ranks()).
  const Region& region(int rank) const { return regions_[size_t(rank)]; }
  /// Same cuts (so the same regions).
  friend bool operator==(const Decomposition& x, const Decomposition& y) {
    return x.ranks_ == y.ranks_ && x.nodes_ == y.nodes_;
  }

 private:
  /// A cut, or a leaf. Nodes are stored in preorder; a node's first child
  /// follows it, `second` names the other one.
  struct Node {
    float split = 0;     ///< the cut: p[axis] < split goes to the first child
    int32_t second = 0;  ///< index of the second child; for a leaf, -1 - rank
    uint8_t axis = 0;    ///< 0, 1, 2 for x, y, z
    friend bool operator==(const Node&, const Node&) = default;
  };
  struct Builder;

  std::vector<Node> nodes_;
  std::vector<Region> regions_;
  int ranks_ = 1;
};

}  // namespace bp::mpi
