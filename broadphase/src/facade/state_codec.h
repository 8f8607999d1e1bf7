// The byte format of BroadPhase::Impl::saveState (docs/snapshots.md): the header,
// the sections that follow it, the little-endian reads and writes, and the
// checksum. Internal: BroadPhase, its tests and the loadState fuzz target use
// it (the tests to build snapshots that are wrong in one field only).
//
// A snapshot is the header, then these sections, back to back, no padding;
// every integer and float little-endian, floats as their IEEE-754 bits:
//
//   layer table      kMaxLayers x u32      LayerTable::rows (symmetric)
//   generations      capacity x u32        every slot's generation
//   free list        freeCount x u32       the free slots, in allocate() order
//   boxes            live x 6 f32          the live proxies' boxes (min xyz, max xyz),
//                                          in index order (live = not in the free list)
//   user data        live x u64
//   flags            live x u8             ProxyFlag bits below
//   filters          filterCount x 2 u64   (category, mask) of the proxies flagged kFlagFilter
//   layers           layerCount x u8       the layer (1 .. kMaxLayers - 1) of the proxies
//                                          flagged kFlagLayer
//   structure boxes  structureBoxCount x 6 f32
//                                          the box queries see, for the proxies flagged
//                                          kFlagStructureBox (a move is pending)
//   renewed          renewedCount x u32    proxies removed since the last update, ascending
//   pairs            pairCount x 2 u32     the last frame's pairs (a, b), ascending keys
//   overrides        overrideCount x 2 u64 (pair index << 1 | side, user data): pair ends
//                                          whose user data is not the proxy's now (0 for a
//                                          slot that is free now), ascending
//   begun            begunCount x u64      indices into the pairs, ascending
//   ended            endedCount x (2 u32, 2 u64)
//                                          (a, b, userDataA, userDataB), ascending keys
//
// and, only when the header's doubleWorld is 1 (the origin is not zero or
// there are double proxies; docs/large_worlds.md), the double section:
//
//   origin           3 f64                 BroadPhase::Impl::origin()
//   pendingCount     u64
//   doubles          doubleCount x (u32, 6 f64)
//                                          (index, applied DAabb) of every live double
//                                          proxy, ascending; a pending add not in the
//                                          structure lists its pending DAabb here
//   pending          pendingCount x (u32, 6 f64)
//                                          (index, pending DAabb) of the double proxies
//                                          whose pending DAabb is not the applied one,
//                                          ascending
//
// The encoding is canonical: one state has one snapshot, and loadState
// rejects any other spelling (a default filter flagged as special, layer 0
// listed, a
// structure box equal to the box, an override equal to the data it
// overrides, lists out of order, a double section with nothing in it, a
// pending DAabb equal to the applied one).
#pragma once

#include <broadphase/layers.h>
#include <broadphase/math/aabb.h>
#include <broadphase/math/daabb.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace bp::snapshot {

inline constexpr uint32_t kMagic = 0x4E535042u;  // "BPSN" as bytes; read little-endian
inline constexpr uint32_t kVersion = 2;
inline constexpr size_t kHeaderBytes = 104;
// The checksum covers every byte from here to the end (so also the header's
// fields after it).
inline constexpr size_t kChecksummedFrom = 24;

// The header, kHeaderBytes long, its fields in this order at these offsets.
struct Header {
  uint32_t magic = kMagic;             // 0
  uint32_t version = kVersion;         // 4
  uint64_t totalBytes = 0;             // 8: the whole snapshot, header included
  uint64_t checksum = 0;               // 16: checksum() of bytes [kChecksummedFrom, totalBytes)
  uint8_t structure = 0;               // 24: the saver's Structure (informational)
  uint8_t pairKinematicKinematic = 0;  // 25: 0 or 1
  uint16_t doubleWorld = 0;            // 26: 0 or 1, the double section follows the ended pairs
  uint32_t salt = 0;                   // 28: HandlePool::salt()
  uint64_t maxPairs = 0;               // 32
  uint32_t capacity = 0;               // 40: slots (HandlePool::capacity())
  uint32_t freeCount = 0;              // 44
  uint32_t filterCount = 0;            // 48
  uint32_t structureBoxCount = 0;      // 52
  uint32_t renewedCount = 0;           // 56
  uint32_t doubleCount = 0;            // 60: live double proxies (0 without the double section)
  uint64_t pairCount = 0;              // 64
  uint64_t overrideCount = 0;          // 72
  uint64_t begunCount = 0;             // 80
  uint64_t endedCount = 0;             // 88
  uint64_t layerCount = 0;             // 96: proxies flagged kFlagLayer
};

// Bits of a proxy's flag byte.
enum ProxyFlag : uint8_t {
  kFlagMotion = 3,         // MotionType (0, 1, 2)
  kFlagFilter = 4,         // its filter is in the filters section (not the default)
  kFlagPendingAdd = 8,     // added (or rehomed) since the last update
  kFlagRehome = 16,        // a pending add still in the structure under its old motion
  kFlagPendingMove = 32,   // in the structure, with a move pending
  kFlagStructureBox = 64,  // queries see another box than its own until the update
  kFlagLayer = 128,        // in a layer other than 0, listed in the layers section
};

// Bytes of each element of the sections, in section order.
inline constexpr size_t kLayerTableBytes = 4 * kMaxLayers;
inline constexpr size_t kBoxBytes = 24;
inline constexpr size_t kPairBytes = 8;
inline constexpr size_t kOverrideBytes = 16;
inline constexpr size_t kEndedBytes = 24;
inline constexpr size_t kDoubleHeadBytes = 32;  // origin and pendingCount
inline constexpr size_t kDoubleBoxBytes = 52;   // index and DAabb

// Where each section starts, from the header's counts and the double
// section's pendingCount; `end` is the snapshot's size (without the double
// section, `doubles` is `end`). Computed in 64 bits from counts already
// checked against the size of the bytes (so nothing overflows).
struct Layout {
  uint64_t layerTable, generations, freeList, boxes, userData, flags, filters, layers,
      structureBoxes, renewed, pairs, overrides, begun, ended, doubles, end;
};
inline Layout layoutOf(const Header& h, uint64_t pendingCount = 0) {
  const uint64_t live = uint64_t(h.capacity) - h.freeCount;
  Layout l{};
  l.layerTable = kHeaderBytes;
  l.generations = l.layerTable + kLayerTableBytes;
  l.freeList = l.generations + 4 * uint64_t(h.capacity);
  l.boxes = l.freeList + 4 * uint64_t(h.freeCount);
  l.userData = l.boxes + kBoxBytes * live;
  l.flags = l.userData + 8 * live;
  l.filters = l.flags + live;
  l.layers = l.filters + 16 * uint64_t(h.filterCount);
  l.structureBoxes = l.layers + h.layerCount;
  l.renewed = l.structureBoxes + kBoxBytes * uint64_t(h.structureBoxCount);
  l.pairs = l.renewed + 4 * uint64_t(h.renewedCount);
  l.overrides = l.pairs + kPairBytes * h.pairCount;
  l.begun = l.overrides + kOverrideBytes * h.overrideCount;
  l.ended = l.begun + 8 * h.begunCount;
  l.doubles = l.ended + kEndedBytes * h.endedCount;
  l.end = l.doubles;
  if (h.doubleWorld != 0)
    l.end += kDoubleHeadBytes + kDoubleBoxBytes * (uint64_t(h.doubleCount) + pendingCount);
  return l;
}

// Little-endian loads and stores at a byte address.
template <class T>
inline T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  if constexpr (std::endian::native == std::endian::big) {
    T r = 0;
    for (size_t k = 0; k < sizeof(T); ++k) r = T((r << 8) | ((v >> (8 * k)) & 0xFF));
    v = r;
  }
  return v;
}
template <class T>
inline void store(std::byte* p, T v) {
  if constexpr (std::endian::native == std::endian::big) {
    T r = 0;
    for (size_t k = 0; k < sizeof(T); ++k) r = T((r << 8) | ((v >> (8 * k)) & 0xFF));
    v = r;
  }
  std::memcpy(p, &v, sizeof(T));
}

// A cursor that writes into bytes sized beforehand.
struct Writer {
  std::byte* at;
  void u8(uint8_t v) { *at++ = std::byte(v); }
  void u16(uint16_t v) { put(v); }
  void u32(uint32_t v) { put(v); }
  void u64(uint64_t v) { put(v); }
  void f32(float v) { put(std::bit_cast<uint32_t>(v)); }
  void f64(double v) { put(std::bit_cast<uint64_t>(v)); }
  void box(const Aabb& b) {
    for (int a = 0; a < 3; ++a) f32(b.min[a]);
    for (int a = 0; a < 3; ++a) f32(b.max[a]);
  }
  void dvec(const DVec3& v) {
    for (int a = 0; a < 3; ++a) f64(v[a]);
  }
  void dbox(const DAabb& b) {
    dvec(b.min);
    dvec(b.max);
  }

 private:
  template <class T>
  void put(T v) {
    store(at, v);
    at += sizeof(T);
  }
};

// A cursor over bytes whose length was checked against the layout: reads
// never pass the end.
struct Reader {
  const std::byte* at;
  uint8_t u8() { return uint8_t(*at++); }
  uint16_t u16() { return get<uint16_t>(); }
  uint32_t u32() { return get<uint32_t>(); }
  uint64_t u64() { return get<uint64_t>(); }
  float f32() { return std::bit_cast<float>(get<uint32_t>()); }
  double f64() { return std::bit_cast<double>(get<uint64_t>()); }
  DVec3 dvec() {
    DVec3 v;
    for (int a = 0; a < 3; ++a) v[a] = f64();
    return v;
  }
  DAabb dbox() {
    DAabb b;
    b.min = dvec();
    b.max = dvec();
    return b;
  }
  Aabb box() {
    Aabb b;
    for (int a = 0; a < 3; ++a) b.min[a] = f32();
    for (int a = 0; a < 3; ++a) b.max[a] = f32();
    return b;
  }

 private:
  template <class T>
  T get() {
    const T v = load<T>(at);
    at += sizeof(T);
    return v;
  }
};

void writeHeader(const Header& h, std::byte* out);  // kHeaderBytes
Header readHeader(const std::byte* in);             // kHeaderBytes

// A 64-bit checksum of `bytes`: four lanes of 8-byte words, each step a
// bijection of the lane, so that any change confined to one 8-byte word
// (a flipped bit, a changed byte) always changes the result; the length
// is mixed in. Not a cryptographic hash: it catches damage, not forgery
// (which loadState's checks of the contents stop).
uint64_t checksum(std::span<const std::byte> bytes);

// Writes the checksum of a snapshot of at least kHeaderBytes into its
// header: for tests that alter a field and want loadState to judge the
// contents rather than the checksum.
void seal(std::span<std::byte> snapshot);

}  // namespace bp::snapshot
