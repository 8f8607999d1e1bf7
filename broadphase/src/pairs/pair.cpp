#include <broadphase/pair.h>

namespace bp {

uint64_t hashPairs(std::span<const Pair> sortedPairs) {
  uint64_t h = 14695981039346656037ull;
  auto mix = [&h](uint32_t v) {
    for (int byte = 0; byte < 4; ++byte) {
      h ^= (v >> (8 * byte)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  for (const Pair& p : sortedPairs) {
    mix(p.a);
    mix(p.b);
  }
  return h;
}

}  // namespace bp
