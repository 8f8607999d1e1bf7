/// \file
/// `CachePadded<T>`: one value alone on its own pair of cache lines.
///
/// Why 128 and not std::hardware_destructive_interference_size: on x86 the
/// adjacent-line prefetcher pulls cache lines in 128-byte pairs, so two
/// writers 64 bytes apart still contend; and GCC 12 defines the standard
/// constant as 64 and warns that it changes with -mtune, which would make the
/// layout of our public structs depend on compiler flags.
#pragma once

#include <cstddef>

namespace bp {

/// Bytes in one cache line of the x86-64 CPUs we target: the unit of memory
/// transfer, for aligning data that one thread reads (data that several
/// threads write needs kFalseSharingRange).
inline constexpr std::size_t kCacheLineSize = 64;
/// Bytes within which two threads' writes contend: two cache lines, because
/// the adjacent-line prefetcher moves lines in pairs. Data written by
/// different threads must be this far apart.
inline constexpr std::size_t kFalseSharingRange = 128;

/// One `T` aligned to, and padded to a multiple of, kFalseSharingRange bytes,
/// so that no other object written by another thread shares its cache line
/// pair. An array of them gives each thread a slot of its own (see PerWorker).
template <class T>
struct alignas(kFalseSharingRange) CachePadded {
  T value{};  ///< the value, value-initialised (zero for arithmetic types)
};

static_assert(sizeof(CachePadded<int>) == kFalseSharingRange);
static_assert(alignof(CachePadded<int>) == kFalseSharingRange);

}  // namespace bp
