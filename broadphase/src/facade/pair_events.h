// eventsBetween: the pairs that begin and end between two frames, from the
// last frame's pair list and this frame's, both sorted by ProxyPair::key()
// with no repeat (the invariant of the facade's pair lists).
//
// A pair only in `current` begins, only in `previous` ends. A pair in both
// stands, unless one of its proxies was renewed since (removed, and its
// index given to a new proxy in the same frame: `renewed(index)` true): then
// the old pair ends and the new one begins. One pass over both lists; the
// facade runs it on key ranges side by side (any cut at a key of `current`
// and the same key's place in `previous` gives the same events in order).
#pragma once

#include <broadphase/broad_phase.h>

#include <cstddef>
#include <span>
#include <vector>

namespace bp {

template <class Renewed>
void eventsBetween(std::span<const ProxyPair> previous, std::span<const ProxyPair> current,
                   bool anyRenewed, Renewed&& renewed, std::vector<ProxyPair>& begun,
                   std::vector<ProxyPair>& ended) {
  size_t i = 0, j = 0;
  const size_t iEnd = previous.size(), jEnd = current.size();
  while (i < iEnd || j < jEnd) {
    if (j == jEnd || (i < iEnd && previous[i].key() < current[j].key())) {
      ended.push_back(previous[i++]);
    } else if (i == iEnd || current[j].key() < previous[i].key()) {
      begun.push_back(current[j++]);
    } else {
      // (Most frames renew no proxy: then a standing pair is not looked at.)
      if (anyRenewed && (renewed(current[j].a) || renewed(current[j].b))) {
        ended.push_back(previous[i]);
        begun.push_back(current[j]);
      }
      ++i;
      ++j;
    }
  }
}

}  // namespace bp
