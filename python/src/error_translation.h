/// \file
/// broadphase.Error: how a bp::Error reaches Python.
#pragma once

#include <broadphase/error.h>

#include <pybind11/pybind11.h>

namespace bp::python {

/// The enumerator's name in C++ ("invalidBox", "staleHandle"...): the `code`
/// attribute of broadphase.Error.
const char* codeName(ErrorCode code);

/// Adds the exception class broadphase.Error (a ValueError and a
/// RuntimeError, with `code` and `message` attributes) to `module` and
/// translates every bp::Error thrown by a binding into it. The bindings'
/// own checks (shapes, dtypes) throw bp::Error too, so every rejection of
/// the module reaches Python the same way.
void registerErrors(pybind11::module_& module);

}  // namespace bp::python
