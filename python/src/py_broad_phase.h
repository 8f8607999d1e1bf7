/// \file
/// PyBroadPhase: bp::BroadPhase with numpy arrays in and out, one call per
/// batch. What the Python class broadphase.BroadPhase wraps (module.cpp
/// binds it; docs/python.md is its reference).
///
/// Every call checks its arrays, and every handle it is given, before the
/// library changes anything, so a rejected call (bp::Error, raised as
/// broadphase.Error) leaves the broadphase as it was. The library works with
/// the GIL released. The lock makes the object safe to share between Python
/// threads: calls that change it take it exclusively, queries shared (the
/// library's queries may run concurrently between updates).
#pragma once

#include "array_views.h"

#include <broadphase/broad_phase.h>
#include <broadphase/error.h>
#include <broadphase/layers.h>
#include <broadphase/math/aabb.h>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <vector>

namespace bp::python {

/// Rejects a call with the library's own error (raised as broadphase.Error
/// with its code) before anything changed.
[[noreturn]] inline void reject(ErrorCode code, const std::string& message) {
  throw Error(code, message);
}

/// A query filter: a proxy is reported when it and the filter accept each
/// other (bp::Filter). The default accepts every proxy of the default filter.
struct QueryFilter {
  uint64_t category = 1;
  uint64_t mask = ~uint64_t(0);
  Filter filter() const { return {category, mask}; }
};

/// A layer table from Python: a (kMaxLayers, kMaxLayers) array of bools,
/// symmetric (invalidArgument otherwise, naming the first asymmetric pair).
LayerTable layerTableOf(py::handle obj, const std::string& what);
/// The table as a (kMaxLayers, kMaxLayers) bool array.
py::array_t<bool> layerTableArray(const LayerTable& table);

class PyBroadPhase {
 public:
  /// `layers`: None (every layer collides with every layer) or a table for
  /// layerTableOf.
  PyBroadPhase(const std::string& structure, int threads, float margin, float cellSize,
               bool pairKinematicKinematic, uint64_t maxPairs, py::handle layers,
               const std::string& rayTree);
  /// BroadPhaseConfig::rayTree by name: automatic, always or never.
  std::string rayTree() const;
  /// BroadPhase::prepareRays, the GIL released.
  void prepareRays();

  // --- Proxies. ---
  /// (N,) uint64 handles; user data defaults to the handle.
  py::array_t<uint64_t> add(py::handle lo, py::handle hi, const std::string& motion,
                            py::handle userData, py::handle category, py::handle mask,
                            py::handle layer);
  void move(py::handle ids, py::handle lo, py::handle hi);
  void remove(py::handle ids);
  void setFilter(py::handle ids, py::handle category, py::handle mask);
  void setMotionType(py::handle ids, const std::string& motion);
  void setUserData(py::handle ids, py::handle userData);
  py::array_t<bool> contains(py::handle ids);
  py::array_t<uint64_t> userData(py::handle ids);

  // --- The frame: (pairs, begun, ended), each (M, 2) uint64 user data. ---
  py::tuple update();

  // --- Queries. ---
  /// (hit, user, t): (R,) bool, uint64 (kNone on a miss), float32 (inf on a miss).
  py::tuple castRays(py::handle origins, py::handle directions, py::handle lengths,
                     const std::string& query, QueryFilter filter);
  /// (offsets, user, t): ray r's hits are [offsets[r], offsets[r + 1]), nearest first.
  py::tuple castRaysAll(py::handle origins, py::handle directions, py::handle lengths,
                        QueryFilter filter);
  /// (K,) uint64 user data of the proxies overlapping one box, by proxy index.
  py::array_t<uint64_t> queryBox(py::handle lo, py::handle hi, QueryFilter filter);
  /// (offsets, user) for Q boxes.
  py::tuple queryBoxes(py::handle lo, py::handle hi, QueryFilter filter);
  py::array_t<uint64_t> queryPoint(py::handle point, QueryFilter filter);
  py::tuple queryPoints(py::handle points, QueryFilter filter);
  /// (user, d2): (P, k) uint64 and float32, nearest first, padded with
  /// kNone / inf where fewer than k proxies are found.
  py::tuple nearest(py::handle points, long k, QueryFilter filter);

  // --- Layers (py_layers_state.cpp). ---
  void setLayer(py::handle ids, py::handle layer);
  void setLayerTable(py::handle table);
  py::array_t<bool> layerTable();
  uint64_t lastStructurePairs();

  // --- Snapshots (py_layers_state.cpp). ---
  /// BroadPhase::saveState as bytes.
  py::bytes saveState();
  /// BroadPhase::loadState from any C-contiguous buffer (bytes, bytearray,
  /// memoryview, a uint8 array); invalidState leaves the object as it was.
  void loadState(py::handle state);
  /// What pickle keeps: (structure, threads, margin, cell_size, snapshot,
  /// ray_tree); a 5-tuple without ray_tree is taken too.
  py::tuple pickleState();
  static std::unique_ptr<PyBroadPhase> fromPickle(const py::tuple& state);

  // --- Large worlds and introspection. ---
  void shiftOrigin(py::handle offset);
  uint32_t proxyCount();
  std::string validate();
  size_t memoryBytes();
  py::dict memoryUse();
  std::string structure() const;
  int threads() const { return world_.threadCount(); }

 private:
  // Throws staleHandle, naming the entry, unless every handle is live.
  void checkLive(std::span<const ProxyId> ids, const char* what) const;
  template <class Query>
  py::tuple groupedQuery(size_t count, Query&& query);

  BroadPhaseConfig config_;  ///< as constructed (pickle rebuilds from it)
  BroadPhase world_;
  std::shared_mutex mutex_;
  std::vector<Aabb> moveBoxes_;  ///< move()'s gathered boxes, kept between frames
};

}  // namespace bp::python
