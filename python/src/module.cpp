// The Python module `broadphase`: BroadPhase over numpy arrays (see
// docs/python.md for the reference, with shapes and dtypes).
#include "array_views.h"
#include "error_translation.h"
#include "py_broad_phase.h"

#include <pybind11/pybind11.h>

namespace py = pybind11;
using bp::python::PyBroadPhase;
using bp::python::QueryFilter;

namespace {

// Every query takes the filter as two keyword arguments.
QueryFilter queryFilter(uint64_t category, uint64_t mask) { return {category, mask}; }

constexpr uint64_t kAll = ~uint64_t(0);

}  // namespace

PYBIND11_MODULE(broadphase, m) {
  m.doc() =
      "broadphase: overlapping pairs of moving axis-aligned boxes, and ray, box, point and "
      "nearest queries, over numpy arrays (docs/python.md).";
  bp::python::registerErrors(m);
  m.attr("NONE") = py::int_(bp::python::kNone);

  py::class_<PyBroadPhase>(m, "BroadPhase",
                           "Proxies (axis-aligned boxes) in, pairs and query answers out. "
                           "add/move/remove record; update() applies them and returns "
                           "(pairs, begun, ended).")
      .def(py::init<const std::string&, int, float, float, bool, uint64_t, py::handle,
                    const std::string&>(),
           py::arg("structure") = "automatic", py::arg("threads") = 0, py::arg("margin") = 0.0f,
           py::arg("cell_size") = 0.0f, py::arg("pair_kinematic_kinematic") = false,
           py::arg("max_pairs") = 0, py::arg("layers") = py::none(),
           py::arg("ray_tree") = "automatic",
           "layers: None (every layer collides with every layer) or a symmetric (32, 32) bool "
           "array, layers[a, b] when layers a and b collide. ray_tree: when rays walk a tree of "
           "their own, 'automatic', 'always' or 'never' (docs/rays.md).")
      .def(
          "prepare_rays", [](PyBroadPhase& w) { w.prepareRays(); },
          "Makes the rays' tree now, so that the next cast_rays or nearest does not pay for it "
          "(a world searched more than it changes calls it after update()).")
      .def("add", &PyBroadPhase::add, py::arg("lo"), py::arg("hi"), py::arg("motion") = "dynamic",
           py::arg("user_data") = py::none(), py::arg("category") = 1, py::arg("mask") = kAll,
           py::arg("layer") = 0,
           "Adds N boxes ((N, 3) lo and hi); returns their (N,) uint64 handles. user_data "
           "defaults to the handles; layer (0-31) is an int or an (N,) array.")
      .def("move", &PyBroadPhase::move, py::arg("ids"), py::arg("lo"), py::arg("hi"))
      .def("remove", &PyBroadPhase::remove, py::arg("ids"))
      .def("set_filter", &PyBroadPhase::setFilter, py::arg("ids"), py::arg("category") = 1,
           py::arg("mask") = kAll)
      .def("set_motion_type", &PyBroadPhase::setMotionType, py::arg("ids"), py::arg("motion"))
      .def("set_user_data", &PyBroadPhase::setUserData, py::arg("ids"), py::arg("user_data"))
      .def("set_layer", &PyBroadPhase::setLayer, py::arg("ids"), py::arg("layer"),
           "Moves the proxies to another broadphase layer (an int or an (N,) array) from the "
           "next update().")
      .def("set_layer_table", &PyBroadPhase::setLayerTable, py::arg("table"),
           "Replaces the layer table (a symmetric (32, 32) bool array) from the next update().")
      .def("layer_table", &PyBroadPhase::layerTable,
           "The layer table in force, a (32, 32) bool array.")
      .def("last_structure_pairs", &PyBroadPhase::lastStructurePairs,
           "Candidate pairs the structure found in the last update(), before the filters.")
      .def("save_state", &PyBroadPhase::saveState,
           "The broadphase's complete state as bytes (docs/snapshots.md).")
      .def("load_state", &PyBroadPhase::loadState, py::arg("state"),
           "Restores a save_state() snapshot (bytes-like); later frames and queries repeat the "
           "saved object's bit for bit. Raises Error (invalidState) and changes nothing on bad "
           "bytes.")
      .def(py::pickle([](PyBroadPhase& w) { return w.pickleState(); },
                      [](const py::tuple& state) { return PyBroadPhase::fromPickle(state); }))
      .def("contains", &PyBroadPhase::contains, py::arg("ids"))
      .def("user_data", &PyBroadPhase::userData, py::arg("ids"))
      .def("update", &PyBroadPhase::update,
           "Applies the pending changes; returns (pairs, begun, ended), each (M, 2) uint64 user "
           "data, sorted by the proxies' indices.")
      .def(
          "cast_rays",
          [](PyBroadPhase& w, py::handle origins, py::handle directions, py::handle lengths,
             const std::string& query, uint64_t category, uint64_t mask) {
            return w.castRays(origins, directions, lengths, query, queryFilter(category, mask));
          },
          py::arg("origins"), py::arg("directions"), py::arg("lengths"),
          py::arg("query") = "closest", py::arg("category") = 1, py::arg("mask") = kAll,
          "Returns (hit, user, t): (R,) bool, uint64 (NONE on a miss), float32 (inf on a miss).")
      .def(
          "cast_rays_all",
          [](PyBroadPhase& w, py::handle origins, py::handle directions, py::handle lengths,
             uint64_t category, uint64_t mask) {
            return w.castRaysAll(origins, directions, lengths, queryFilter(category, mask));
          },
          py::arg("origins"), py::arg("directions"), py::arg("lengths"), py::arg("category") = 1,
          py::arg("mask") = kAll,
          "Returns (offsets, user, t): ray r's hits are [offsets[r], offsets[r+1]), nearest "
          "first.")
      .def(
          "query_box",
          [](PyBroadPhase& w, py::handle lo, py::handle hi, uint64_t category, uint64_t mask) {
            return w.queryBox(lo, hi, queryFilter(category, mask));
          },
          py::arg("lo"), py::arg("hi"), py::arg("category") = 1, py::arg("mask") = kAll)
      .def(
          "query_boxes",
          [](PyBroadPhase& w, py::handle lo, py::handle hi, uint64_t category, uint64_t mask) {
            return w.queryBoxes(lo, hi, queryFilter(category, mask));
          },
          py::arg("lo"), py::arg("hi"), py::arg("category") = 1, py::arg("mask") = kAll)
      .def(
          "query_point",
          [](PyBroadPhase& w, py::handle point, uint64_t category, uint64_t mask) {
            return w.queryPoint(point, queryFilter(category, mask));
          },
          py::arg("point"), py::arg("category") = 1, py::arg("mask") = kAll)
      .def(
          "query_points",
          [](PyBroadPhase& w, py::handle points, uint64_t category, uint64_t mask) {
            return w.queryPoints(points, queryFilter(category, mask));
          },
          py::arg("points"), py::arg("category") = 1, py::arg("mask") = kAll)
      .def(
          "nearest",
          [](PyBroadPhase& w, py::handle points, long k, uint64_t category, uint64_t mask) {
            return w.nearest(points, k, queryFilter(category, mask));
          },
          py::arg("points"), py::arg("k"), py::arg("category") = 1, py::arg("mask") = kAll,
          "Returns (user, d2): (P, k) uint64 and float32, nearest first; NONE and inf pad a row "
          "when fewer than k proxies are found.")
      .def("shift_origin", &PyBroadPhase::shiftOrigin, py::arg("offset"))
      .def("proxy_count", &PyBroadPhase::proxyCount)
      .def("validate", &PyBroadPhase::validate)
      .def("memory_bytes", &PyBroadPhase::memoryBytes)
      .def("memory_use", &PyBroadPhase::memoryUse,
           "memory_bytes() by part: a dict of structure, ray_tree, proxies, changes, pairs, "
           "events, doubles and query_view (bytes; see docs/memory.md).")
      .def_property_readonly("structure", &PyBroadPhase::structure)
      .def_property_readonly("threads", &PyBroadPhase::threads);
}
