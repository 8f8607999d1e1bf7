// The snapshot header and checksum of state_codec.h.
#include "facade/state_codec.h"

namespace bp::snapshot {

void writeHeader(const Header& h, std::byte* out) {
  Writer w{out};
  w.u32(h.magic);
  w.u32(h.version);
  w.u64(h.totalBytes);
  w.u64(h.checksum);
  w.u8(h.structure);
  w.u8(h.pairKinematicKinematic);
  w.u16(h.doubleWorld);
  w.u32(h.salt);
  w.u64(h.maxPairs);
  w.u32(h.capacity);
  w.u32(h.freeCount);
  w.u32(h.filterCount);
  w.u32(h.structureBoxCount);
  w.u32(h.renewedCount);
  w.u32(h.doubleCount);
  w.u64(h.pairCount);
  w.u64(h.overrideCount);
  w.u64(h.begunCount);
  w.u64(h.endedCount);
  w.u64(h.layerCount);
}

Header readHeader(const std::byte* in) {
  Reader r{in};
  Header h;
  h.magic = r.u32();
  h.version = r.u32();
  h.totalBytes = r.u64();
  h.checksum = r.u64();
  h.structure = r.u8();
  h.pairKinematicKinematic = r.u8();
  h.doubleWorld = r.u16();
  h.salt = r.u32();
  h.maxPairs = r.u64();
  h.capacity = r.u32();
  h.freeCount = r.u32();
  h.filterCount = r.u32();
  h.structureBoxCount = r.u32();
  h.renewedCount = r.u32();
  h.doubleCount = r.u32();
  h.pairCount = r.u64();
  h.overrideCount = r.u64();
  h.begunCount = r.u64();
  h.endedCount = r.u64();
  h.layerCount = r.u64();
  return h;
}

namespace {
constexpr uint64_t kMultiplier = 0x9E3779B97F4A7C15ull;  // odd: multiplying is a bijection
inline uint64_t step(uint64_t lane, uint64_t word) {
  return std::rotl((lane ^ word) * kMultiplier, 31);
}
}  // namespace

uint64_t checksum(std::span<const std::byte> bytes) {
  uint64_t lane[4] = {0x243F6A8885A308D3ull, 0x13198A2E03707344ull, 0xA4093822299F31D0ull,
                      0x082EFA98EC4E6C89ull};
  const size_t n = bytes.size();
  const std::byte* p = bytes.data();
  size_t k = 0;
  for (; k + 32 <= n; k += 32)
    for (int l = 0; l < 4; ++l) lane[l] = step(lane[l], load<uint64_t>(p + k + 8 * l));
  // The tail, zero-padded to whole words (the length below tells a tail of
  // zeros from none).
  std::byte tail[32] = {};
  if (n > k) std::memcpy(tail, p + k, n - k);
  for (int l = 0; l < 4 && k + 8 * size_t(l) < n; ++l)
    lane[l] = step(lane[l], load<uint64_t>(tail + 8 * l));
  uint64_t h = n;
  for (int l = 0; l < 4; ++l) h = step(h, lane[l]);
  return h ^ (h >> 32);
}

void seal(std::span<std::byte> snapshot) {
  store<uint64_t>(snapshot.data() + 16, checksum(snapshot.subspan(kChecksummedFrom)));
}

}  // namespace bp::snapshot
