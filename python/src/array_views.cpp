#include "array_views.h"

#include <broadphase/error.h>
#include <broadphase/layers.h>

#include <bit>
#include <cstddef>

namespace bp::python {

// Handles are read in place: a uint64 generation << 32 | index is a ProxyId
// {index, generation} in memory on a little-endian machine.
static_assert(std::endian::native == std::endian::little);
static_assert(sizeof(ProxyId) == 8 && offsetof(ProxyId, index) == 0 &&
              offsetof(ProxyId, generation) == 4);

namespace {

[[noreturn]] void reject(const std::string& message) {
  throw Error(ErrorCode::invalidArgument, message);
}

std::string shapeText(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t d = 0; d < a.ndim(); ++d) {
    if (d > 0) s += ", ";
    s += std::to_string(a.shape(d));
  }
  return s + (a.ndim() == 1 ? ",)" : ")");
}

std::string dtypeText(const py::array& a) { return py::str(a.dtype()).cast<std::string>(); }

// An ndarray as it is; any other object through numpy.asarray (a list of
// numbers becomes float64 or int64 there).
py::array asArray(py::handle obj, const char* dtype) {
  if (py::isinstance<py::array>(obj)) return py::reinterpret_borrow<py::array>(obj);
  py::module_ numpy = py::module_::import("numpy");
  return dtype ? numpy.attr("asarray")(obj, dtype) : numpy.attr("asarray")(obj);
}

void checkLayout(const py::array& a, const std::string& what) {
  if (!(a.flags() & py::array::c_style))
    reject(what + " must be C-contiguous (numpy.ascontiguousarray makes it so)");
  if (!py::cast<bool>(a.attr("flags").attr("aligned"))) reject(what + " must be aligned");
}

// float32 as it is, float64 rounded to float32; no other dtype.
py::array_t<float> asFloat32(const py::array& a, const std::string& what) {
  checkLayout(a, what);
  if (a.dtype().is(py::dtype::of<float>())) return py::reinterpret_borrow<py::array_t<float>>(a);
  if (a.dtype().is(py::dtype::of<double>()))
    return py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(a);
  reject(what + " must be float32 or float64, not " + dtypeText(a));
}

}  // namespace

Vec3Rows vec3Rows(py::handle obj, const std::string& what, long rows) {
  py::array a = asArray(obj, "float64");
  if (a.ndim() != 2 || a.shape(1) != 3)
    reject(what + " must have shape (N, 3), not " + shapeText(a));
  if (rows >= 0 && a.shape(0) != rows)
    reject(what + " has " + std::to_string(a.shape(0)) + " rows, " + std::to_string(rows) +
           " expected");
  Vec3Rows out;
  out.array = asFloat32(a, what);
  out.data = out.array.data();
  out.rows = size_t(a.shape(0));
  return out;
}

Vec3 vec3(py::handle obj, const std::string& what) {
  py::array a = asArray(obj, "float64");
  if (a.ndim() != 1 || a.shape(0) != 3) reject(what + " must have shape (3,), not " + shapeText(a));
  py::array_t<float> f = asFloat32(a, what);
  return Vec3(f.data()[0], f.data()[1], f.data()[2]);
}

FloatColumn floatColumn(py::handle obj, const std::string& what, size_t rows) {
  FloatColumn out;
  if (py::isinstance<py::float_>(obj) || py::isinstance<py::int_>(obj)) {
    out.scalar = py::cast<float>(obj);
    return out;
  }
  py::array a = asArray(obj, "float64");
  if (a.ndim() == 0) {  // a numpy scalar
    out.scalar = py::cast<float>(a.attr("item")());
    return out;
  }
  if (a.ndim() != 1 || size_t(a.shape(0)) != rows)
    reject(what + " must be a number or have shape (" + std::to_string(rows) + ",), not " +
           shapeText(a));
  out.array = asFloat32(a, what);
  out.data = out.array.data();
  return out;
}

U64Column u64Column(py::handle obj, const std::string& what, size_t rows) {
  U64Column out;
  if (py::isinstance<py::int_>(obj)) {
    if (py::reinterpret_borrow<py::int_>(obj) < py::int_(0)) reject(what + " must not be negative");
    out.scalar = py::cast<uint64_t>(obj);
    return out;
  }
  py::array a = asArray(obj, nullptr);
  if (a.ndim() == 0 && (a.dtype().kind() == 'u' || a.dtype().kind() == 'i'))  // a numpy scalar
    return u64Column(a.attr("item")(), what, rows);
  if (a.ndim() != 1 || size_t(a.shape(0)) != rows)
    reject(what + " must be an int or have shape (" + std::to_string(rows) + ",), not " +
           shapeText(a));
  const char kind = a.dtype().kind();
  if (kind != 'u' && kind != 'i')
    reject(what + " must have an integer dtype (uint64), not " + dtypeText(a));
  checkLayout(a, what);
  if (kind == 'i' && rows > 0 && a.attr("min")() < py::int_(0))
    reject(what + " must not hold negative values");
  out.array = py::array_t<uint64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  out.data = out.array.data();
  return out;
}

U64Column layerColumn(py::handle obj, const std::string& what, size_t rows) {
  const U64Column out = u64Column(obj, what, rows);
  const size_t count = out.data ? rows : 1;
  for (size_t k = 0; k < count; ++k)
    if (out.at(k) >= kMaxLayers)
      reject(what + (out.data ? " entry " + std::to_string(k) : std::string()) + ": layer " +
             std::to_string(out.at(k)) + " is out of range (layers are 0 to " +
             std::to_string(kMaxLayers - 1) + ")");
  return out;
}

HandleArray handleArray(py::handle obj, const std::string& what) {
  py::array a = asArray(obj, "uint64");
  if (a.ndim() != 1) reject(what + " must have shape (N,), not " + shapeText(a));
  if (!a.dtype().is(py::dtype::of<uint64_t>()))
    reject(what + " must be uint64 (the handles add() returns), not " + dtypeText(a));
  checkLayout(a, what);
  HandleArray out;
  out.array = py::reinterpret_borrow<py::array_t<uint64_t>>(a);
  out.ids = {reinterpret_cast<const ProxyId*>(out.array.data()), size_t(a.shape(0))};
  return out;
}

}  // namespace bp::python
