#include "error_translation.h"

#include <string>

namespace bp::python {

namespace py = pybind11;

const char* codeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::invalidBox: return "invalidBox";
    case ErrorCode::invalidRay: return "invalidRay";
    case ErrorCode::staleHandle: return "staleHandle";
    case ErrorCode::invalidArgument: return "invalidArgument";
    case ErrorCode::capacityExceeded: return "capacityExceeded";
    case ErrorCode::invalidState: return "invalidState";
  }
  return "unknown";
}

namespace {

// The class object, created once when the module is imported and kept for
// the life of the process (a translator may run until the interpreter ends).
PyObject* gErrorType = nullptr;

}  // namespace

void registerErrors(py::module_& module) {
  // Both bases: callers that check arguments catch ValueError, callers that
  // treat library failures alike catch RuntimeError, and the C++ class is a
  // std::runtime_error.
  py::tuple bases = py::make_tuple(py::reinterpret_borrow<py::object>(PyExc_ValueError),
                                   py::reinterpret_borrow<py::object>(PyExc_RuntimeError));
  gErrorType = PyErr_NewExceptionWithDoc(
      "broadphase.Error",
      "A call the library rejected before changing anything. `code` is the C++ "
      "bp::ErrorCode's name (invalidBox, invalidRay, staleHandle, invalidArgument, "
      "capacityExceeded, invalidState), `message` the library's message.",
      bases.ptr(), nullptr);
  if (gErrorType == nullptr) throw py::error_already_set();
  module.add_object("Error", py::handle(gErrorType));  // the module holds a reference too

  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const Error& e) {
      py::object type = py::reinterpret_borrow<py::object>(gErrorType);
      py::object instance = type(e.what());
      instance.attr("code") = codeName(e.code());
      instance.attr("message") = std::string(e.what());
      PyErr_SetObject(gErrorType, instance.ptr());
    }
  });
}

}  // namespace bp::python
