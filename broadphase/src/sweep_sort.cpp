// The sort of a cell's keys at its refresh (see sweep_sort.h).
#include "sweep_sort.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace bp {

namespace {

// Insertion sort of nearly sorted keys; gives up (leaving a permutation) once
// more than `budget` keys have been shifted.
bool insertionSortKeys(uint64_t* keys, uint32_t n, uint64_t budget) {
  uint64_t shifts = 0;
  for (uint32_t i = 1; i < n; ++i) {
    const uint64_t key = keys[i];
    if (keys[i - 1] < key) continue;
    uint32_t j = i;
    do {
      keys[j] = keys[j - 1];
      --j;
    } while (j > 0 && keys[j - 1] > key);
    keys[j] = key;
    shifts += i - j;
    if (shifts > budget) return false;
  }
  return true;
}

// One pass of bubble sort without branches: the larger key is carried
// forward (min/max with conditional moves). It settles the keys that moved
// one place down and any that moved up, so the insertion sort after it
// mostly finds its keys in place, and its branch is predicted: a quarter of
// the entries of uniform 10^5 change places each frame, mostly by one,
// which cost a mispredicted branch each. A/B on uniform 10^5, one thread:
// 2.64 -> 2.44 ms a frame; plane unchanged (1.84 / 1.87). A second pass
// carrying the smaller key backward gained nothing more.
void bubbleForward(uint64_t* keys, uint32_t n) {
  if (n < 2) return;
  uint64_t carry = keys[0];
  for (uint32_t i = 1; i < n; ++i) {
    const uint64_t k = keys[i];
    keys[i - 1] = k < carry ? k : carry;
    carry = k < carry ? carry : k;
  }
  keys[n - 1] = carry;
}

}  // namespace

// Sorts the n keys of a refreshed cell: keys[0, old) are last frame's
// members in last frame's order with their new keys (nearly sorted: an
// insertion sort repairs them, std::sort past a budget of 8 shifts a key),
// keys[old, n) the entrants, in no order. Entrants are sorted on their own
// and merged in from the back, each after a binary search, so a box that
// entered is not shifted one step at a time across the cell: appended at the
// end and insertion-sorted, the ~3% of boxes that change cells each frame
// made up most of the shifts on uniform 10^5.
void sortCellKeys(uint64_t* keys, uint32_t old, uint32_t n) {
  const uint32_t entrants = n - old;
  if (entrants > old / 4) {  // a new cell, or a crowd arrived: sort afresh
    std::sort(keys, keys + n);
    return;
  }
  bubbleForward(keys, old);
  if (!insertionSortKeys(keys, old, 8 * uint64_t(old) + 64)) std::sort(keys, keys + old);
  if (entrants == 0) return;
  uint64_t* in = keys + old;
  if (entrants > 1) std::sort(in, in + entrants);
  // The entrants are copied out, since the merge writes over their places:
  // to the stack when few, else to a per-thread buffer.
  uint64_t held[64];
  thread_local std::vector<uint64_t> heap;
  const bool onStack = entrants <= 64;
  if (onStack)
    std::copy(in, in + entrants, held);
  else
    heap.assign(in, in + entrants);
  const uint64_t* enter = onStack ? held : heap.data();
  // Entrant j (from the largest) goes after every old key below it; the old
  // keys above it move up by the j + 1 entrants not placed yet.
  uint32_t end = old;
  for (uint32_t j = entrants; j-- > 0;) {
    const uint32_t at = uint32_t(std::upper_bound(keys, keys + end, enter[j]) - keys);
    std::memmove(keys + at + j + 1, keys + at, size_t(end - at) * sizeof(uint64_t));
    keys[at + j] = enter[j];
    end = at;
  }
}

}  // namespace bp
