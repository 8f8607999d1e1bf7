// The check of a move batch that every structure and the facade make before
// changing anything: each handle live, each box valid (isValid()).
#pragma once

#include <broadphase/math/aabb.h>
#include "common/handle_pool.h"

#include <cstddef>
#include <span>

namespace bp {

// True when entries [begin, end) of the batch all name live proxies of
// `pool` and carry valid boxes. No branch per entry (a frame's batch is
// every moving proxy; with AVX2 a box is checked in one register), so it
// only tells whether some entry is bad: the caller then finds the first one
// with the checks that explain it.
bool allLiveAndValid(const HandlePool& pool, std::span<const ProxyId> ids,
                     std::span<const Aabb> boxes, size_t begin, size_t end);

// True when the indices of entries [begin, end) each exceed the index of the
// entry before them (entry 0 has none): the batch names no proxy twice
// there, so its entries may be written by several threads at once.
bool indicesAscending(std::span<const ProxyId> ids, size_t begin, size_t end);
// The same for a batch of bare indices.
bool indicesAscending(std::span<const uint32_t> indices, size_t begin, size_t end);

}  // namespace bp
