// The test-only module `_bp_testkit`: the standard scenes of docs/scenes.md
// (bp::makeScene, bp::makeRays) as numpy arrays, so that the Python tests
// run on the same boxes, motion and rays as the C++ tests. Built with the
// tests, never installed.
#include "array_views.h"

#include <broadphase/testkit/scene.h>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

namespace py = pybind11;
using bp::python::toArray;

namespace {

py::array_t<float> corners(const bp::Scene& scene, bool upper) {
  std::vector<float> out(3 * scene.boxes.size());
  for (size_t i = 0; i < scene.boxes.size(); ++i) {
    const bp::Vec3& v = upper ? scene.boxes[i].max : scene.boxes[i].min;
    for (int a = 0; a < 3; ++a) out[3 * i + a] = v[a];
  }
  return toArray(std::move(out), {py::ssize_t(scene.boxes.size()), 3});
}

}  // namespace

PYBIND11_MODULE(_bp_testkit, m) {
  m.doc() = "The standard scenes of docs/scenes.md, for the tests of the broadphase module.";
  py::class_<bp::Scene>(m, "Scene")
      .def_property_readonly("n", [](const bp::Scene& s) { return s.n; })
      .def_property_readonly("frame", [](const bp::Scene& s) { return s.frame; })
      .def_property_readonly("lo", [](const bp::Scene& s) { return corners(s, false); })
      .def_property_readonly("hi", [](const bp::Scene& s) { return corners(s, true); })
      .def_property_readonly("is_static",
                             [](const bp::Scene& s) {
                               py::array_t<bool> out(static_cast<py::ssize_t>(s.isStatic.size()));
                               for (size_t i = 0; i < s.isStatic.size(); ++i)
                                 out.mutable_data()[i] = s.isStatic[i] != 0;
                               return out;
                             })
      .def("step", &bp::Scene::step);
  m.def(
      "make_scene",
      [](const std::string& name, uint32_t n, uint64_t seed) {
        const auto kind = bp::parseScene(name);
        if (!kind) throw std::invalid_argument("unknown scene '" + name + "'");
        return bp::makeScene(*kind, n, seed);
      },
      py::arg("name"), py::arg("n"), py::arg("seed") = 1);
  m.def(
      "make_rays",
      [](uint32_t n, uint32_t count, uint64_t seed) {
        const std::vector<bp::Ray> rays = bp::makeRays(n, count, seed);
        std::vector<float> origins(3 * count), directions(3 * count), lengths(count);
        for (uint32_t r = 0; r < count; ++r) {
          for (int a = 0; a < 3; ++a) {
            origins[3 * r + a] = rays[r].origin[a];
            directions[3 * r + a] = rays[r].direction[a];
          }
          lengths[r] = rays[r].maxT;
        }
        const py::ssize_t c = count;
        return py::make_tuple(toArray(std::move(origins), {c, 3}),
                              toArray(std::move(directions), {c, 3}),
                              toArray(std::move(lengths), {c}));
      },
      py::arg("n"), py::arg("count"), py::arg("seed") = 2);
}
