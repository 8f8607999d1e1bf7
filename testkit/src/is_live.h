// isLive(): whether slot i of the oracle's input takes part (an empty mask
// means every slot does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace bp::brute::detail {

inline bool isLive(std::span<const uint8_t> live, size_t i) { return live.empty() || live[i] != 0; }

}  // namespace bp::brute::detail
