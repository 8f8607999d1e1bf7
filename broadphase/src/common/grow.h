// Resizing of the lists a frame refills (the pair lists and their scratch).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace bp {

// v.resize(n), for a list refilled every frame. When it must grow it takes
// an eighth more than n (twice its old capacity if that is more), so that a
// count that creeps up from frame to frame (a pair list at the first frames
// of a scene) does not move to a fresh block again a few frames later: each
// move copies the list and first-touches new pages, and page faults are dear
// (docs/decisions.md, "The facade and `automatic`"; docs/memory.md, "Huge
// pages").
template <class T>
void resizeWithHeadroom(std::vector<T>& v, size_t n) {
  if (n > v.capacity()) v.reserve(std::max(n + n / 8, 2 * v.capacity()));
  v.resize(n);
}

}  // namespace bp
