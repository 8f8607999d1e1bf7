// The sort of a cell's entries at each refresh, on 8-byte keys (min x as an
// ordered uint32, then the proxy index: unique, so the order is total).
#pragma once

#include <cstdint>

namespace bp {

// Sorts keys[0, n): keys[0, old) are last frame's members in last frame's
// order with their new keys (nearly sorted), keys[old, n) the entrants, in no
// order. Any input is sorted correctly; the nearly sorted case is the fast
// one.
void sortCellKeys(uint64_t* keys, uint32_t old, uint32_t n);

}  // namespace bp
