// The sort of a cell's entries at each refresh, on 8-byte keys (min x as an
// ordered uint32, then the proxy index: unique, so the order is total).
#pragma once

#include <cstdint>

namespace bp {

// The pass that settles the small moves before the insertion sort finishes
// the order. automatic: the widest the CPU runs (checked at run time for
// AVX-512; the build's baseline decides AVX2), bubble without AVX2. Every
// choice gives the same sorted keys; the choice exists for the tests.
enum class SortPrepass : uint8_t { automatic, bubble, avx2, avx512 };

// Whether `prepass` runs on this build and CPU (automatic and bubble always).
bool sortPrepassAvailable(SortPrepass prepass);

// Sorts keys[0, n): keys[0, old) are last frame's members in last frame's
// order with their new keys (nearly sorted), keys[old, n) the entrants, in no
// order. Any input is sorted correctly; the nearly sorted case is the fast
// one. A prepass not available falls back to the next narrower one.
void sortCellKeys(uint64_t* keys, uint32_t old, uint32_t n,
                  SortPrepass prepass = SortPrepass::automatic);

}  // namespace bp
