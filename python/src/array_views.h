/// \file
/// The arrays the bindings take and return. Inputs are checked before any
/// library call (shape, dtype, C order, alignment) and read in place when
/// they are float32 / uint64 already; float64 coordinates are rounded to
/// float32 in one copy. Outputs hand a std::vector's buffer to numpy without
/// copying it.
#pragma once

#include <broadphase/math/vec3.h>
#include <broadphase/proxy_id.h>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace bp::python {

namespace py = pybind11;

/// What every array-taking call returns for "no proxy": in a `user` slot of a
/// missed ray or of a nearest() row with fewer than k proxies.
inline constexpr uint64_t kNone = UINT64_MAX;

/// Rows of three float32 (points, box corners, ray origins...), C order:
/// the caller's array, or a float32 copy of a float64 one.
struct Vec3Rows {
  py::array_t<float> array;  ///< holds the buffer while the library reads it
  const float* data = nullptr;
  size_t rows = 0;
  Vec3 row(size_t i) const { return Vec3(data[3 * i], data[3 * i + 1], data[3 * i + 2]); }
};

/// An (N, 3) array of coordinates; `rows` >= 0 demands that many. Rejects
/// (invalidArgument) another shape, a dtype other than float32 / float64, a
/// non-contiguous or misaligned array. A Python sequence (not an ndarray) is
/// converted as numpy.asarray(obj, float64) would, then to float32.
Vec3Rows vec3Rows(py::handle obj, const std::string& what, long rows = -1);
/// One (3,) vector, under the same rules.
Vec3 vec3(py::handle obj, const std::string& what);

/// A float per row: an (N,) array under the rules of vec3Rows, or one number
/// for every row.
struct FloatColumn {
  py::array_t<float> array;
  const float* data = nullptr;
  float scalar = 0;
  float at(size_t i) const { return data ? data[i] : scalar; }
};
FloatColumn floatColumn(py::handle obj, const std::string& what, size_t rows);

/// A uint64 per row: an (N,) array of an integer dtype with no negative
/// value, or one int for every row.
struct U64Column {
  py::array_t<uint64_t> array;
  const uint64_t* data = nullptr;
  uint64_t scalar = 0;
  uint64_t at(size_t i) const { return data ? data[i] : scalar; }
};
U64Column u64Column(py::handle obj, const std::string& what, size_t rows);

/// Handles as add() returns them: an (N,) uint64 array, read in place as
/// ProxyIds (handle = generation << 32 | index, the little-endian layout of
/// ProxyId). Rejects another dtype or shape (invalidArgument); liveness is
/// the library's check.
struct HandleArray {
  py::array_t<uint64_t> array;
  std::span<const ProxyId> ids;
};
HandleArray handleArray(py::handle obj, const std::string& what);

/// Broadphase layers, one per row: a u64Column whose every value is below
/// kMaxLayers (invalidArgument naming the first that is not).
U64Column layerColumn(py::handle obj, const std::string& what, size_t rows);

/// The uint64 a handle is in Python.
inline uint64_t handleBits(ProxyId id) { return (uint64_t(id.generation) << 32) | id.index; }

/// A numpy array of `shape` that owns `values`' buffer (moved, not copied).
template <class T>
py::array_t<T> toArray(std::vector<T>&& values, std::vector<py::ssize_t> shape) {
  auto* owned = new std::vector<T>(std::move(values));
  py::capsule free(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  return py::array_t<T>(std::move(shape), owned->data(), free);
}

}  // namespace bp::python
