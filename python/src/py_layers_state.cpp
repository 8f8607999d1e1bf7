// PyBroadPhase's broadphase layers and snapshots: the layer table as a
// (32, 32) bool array, set_layer, save_state / load_state as bytes, and
// pickling through the snapshot.
#include "py_broad_phase.h"

#include <broadphase/error.h>

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

namespace bp::python {

namespace {

constexpr py::ssize_t kRows = py::ssize_t(kMaxLayers);

}  // namespace

LayerTable layerTableOf(py::handle obj, const std::string& what) {
  py::array a = py::array::ensure(obj);
  if (!a || a.ndim() != 2 || a.shape(0) != kRows || a.shape(1) != kRows)
    reject(ErrorCode::invalidArgument, what + " must be a (" + std::to_string(kMaxLayers) + ", " +
                                           std::to_string(kMaxLayers) + ") array of bools");
  if (a.dtype().kind() != 'b')
    reject(ErrorCode::invalidArgument,
           what + " must have dtype bool, not " + std::string(py::str(a.dtype())));
  // 1024 entries, read once: any layout will do.
  const auto bits = py::array_t<bool, py::array::forcecast>::ensure(a).unchecked<2>();
  LayerTable table = LayerTable::none();
  for (uint32_t i = 0; i < kMaxLayers; ++i)
    for (uint32_t j = 0; j < kMaxLayers; ++j)
      if (bits(i, j)) table.rows[i] |= uint32_t(1) << j;
  // (Symmetry is the library's check: BroadPhase's constructor and
  // setLayerTable name the first pair of layers that differ.)
  return table;
}

py::array_t<bool> layerTableArray(const LayerTable& table) {
  py::array_t<bool> out({kRows, kRows});
  auto bits = out.mutable_unchecked<2>();
  for (uint32_t i = 0; i < kMaxLayers; ++i)
    for (uint32_t j = 0; j < kMaxLayers; ++j) bits(i, j) = table.collides(i, j);
  return out;
}

void PyBroadPhase::setLayer(py::handle ids, py::handle layer) {
  const HandleArray handles = handleArray(ids, "set_layer: ids");
  const U64Column layers = layerColumn(layer, "set_layer: layer", handles.ids.size());
  py::gil_scoped_release release;
  std::unique_lock lock(mutex_);
  checkLive(handles.ids, "set_layer");
  for (size_t k = 0; k < handles.ids.size(); ++k)
    world_.setLayer(handles.ids[k], uint32_t(layers.at(k)));
}

void PyBroadPhase::setLayerTable(py::handle table) {
  const LayerTable t = layerTableOf(table, "set_layer_table: table");
  py::gil_scoped_release release;
  std::unique_lock lock(mutex_);
  world_.setLayerTable(t);
}

py::array_t<bool> PyBroadPhase::layerTable() {
  LayerTable t;
  {
    py::gil_scoped_release release;
    std::shared_lock lock(mutex_);
    t = world_.layerTable();
  }
  return layerTableArray(t);
}

uint64_t PyBroadPhase::lastStructurePairs() {
  py::gil_scoped_release release;
  std::shared_lock lock(mutex_);
  return world_.lastStructurePairs();
}

py::bytes PyBroadPhase::saveState() {
  std::vector<std::byte> bytes;
  {
    py::gil_scoped_release release;
    std::shared_lock lock(mutex_);
    world_.saveState(bytes);
  }
  return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void PyBroadPhase::loadState(py::handle state) {
  // The caller's buffer, read in place; it cannot be resized while exported.
  Py_buffer view;
  if (PyObject_GetBuffer(state.ptr(), &view, PyBUF_C_CONTIGUOUS) != 0) {
    PyErr_Clear();
    reject(ErrorCode::invalidArgument,
           "load_state: state must be a C-contiguous buffer (bytes, bytearray, memoryview), not " +
               std::string(py::str(py::type::of(state).attr("__name__"))));
  }
  struct Release {
    Py_buffer* view;
    ~Release() { PyBuffer_Release(view); }
  } release{&view};
  const std::span<const std::byte> bytes(static_cast<const std::byte*>(view.buf), size_t(view.len));
  py::gil_scoped_release unlocked;
  std::unique_lock lock(mutex_);
  world_.loadState(bytes);  // invalidState, the object unchanged, on a bad snapshot
}

py::tuple PyBroadPhase::pickleState() {
  return py::make_tuple(structure(), config_.threads, config_.margin, config_.cellSize, saveState(),
                        rayTree());
}

std::unique_ptr<PyBroadPhase> PyBroadPhase::fromPickle(const py::tuple& state) {
  if (state.size() != 5 && state.size() != 6)
    reject(ErrorCode::invalidArgument, "BroadPhase.__setstate__: a 6-tuple is expected");
  auto out = std::make_unique<PyBroadPhase>(
      state[0].cast<std::string>(), state[1].cast<int>(), state[2].cast<float>(),
      state[3].cast<float>(), false, 0, py::none(),
      state.size() == 6 ? state[5].cast<std::string>() : std::string("automatic"));
  out->loadState(state[4]);  // takes maxPairs, pairKinematicKinematic and the layers over
  return out;
}

}  // namespace bp::python
