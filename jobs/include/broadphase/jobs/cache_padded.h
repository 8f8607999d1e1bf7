// CachePadded<T>: one value alone on its own pair of cache lines.
//
// Why 128 and not std::hardware_destructive_interference_size: on x86 the
// adjacent-line prefetcher pulls cache lines in 128-byte pairs, so two
// writers 64 bytes apart still contend; and GCC 12 defines the standard
// constant as 64 and warns that it changes with -mtune, which would make the
// layout of our public structs depend on compiler flags.
#pragma once

#include <cstddef>

namespace bp {

inline constexpr std::size_t kCacheLineSize = 64;
inline constexpr std::size_t kFalseSharingRange = 128;

template <class T>
struct alignas(kFalseSharingRange) CachePadded {
  T value{};
};

static_assert(sizeof(CachePadded<int>) == kFalseSharingRange);
static_assert(alignof(CachePadded<int>) == kFalseSharingRange);

}  // namespace bp
