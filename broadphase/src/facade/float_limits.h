// kInfinity: +inf as a float, the "no hit" distance and the empty k-th of
// the facade's queries (one definition for every file of the facade, which
// unity builds compile together).
#pragma once

#include <limits>

namespace bp {

inline constexpr float kInfinity = std::numeric_limits<float>::infinity();

}  // namespace bp
