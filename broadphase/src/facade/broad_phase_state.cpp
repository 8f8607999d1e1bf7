// BroadPhase::Impl::saveState and loadState: the facade's state as bytes (the
// format: state_codec.h; the guarantees: docs/snapshots.md).
//
// What is saved is what decides later results: the proxies, the handle pool
// (generations, free-list order, salt), the pending changes, the boxes
// queries see until the next update, the proxies renewed since it, the last
// frame's pairs and events, the layer table, maxPairs and
// pairKinematicKinematic. The
// structure's shape is not saved: loadState builds a fresh one from the
// proxies, in index order. Every result that names proxies is canonical
// (pairs and events sorted by key, hits and neighbours tied to the lower
// index, distances computed from the box alone), so it does not depend on
// the shape; the snapshot tests check this against uninterrupted runs.
#include "facade/broad_phase_impl.h"

#include "common/report_error.h"
#include "facade/broad_phase_side.h"
#include "facade/double_world.h"
#include "facade/layer_check.h"
#include "facade/query_view.h"
#include "facade/state_codec.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>

namespace bp {

namespace {

bool sameBits(const Aabb& a, const Aabb& b) { return std::memcmp(&a, &b, sizeof(Aabb)) == 0; }
bool sameBits(const DAabb& a, const DAabb& b) { return std::memcmp(&a, &b, sizeof(DAabb)) == 0; }
bool sameBits(const DVec3& a, const DVec3& b) { return std::memcmp(&a, &b, sizeof(DVec3)) == 0; }

std::string str(uint64_t v) { return std::to_string(v); }

}  // namespace

struct BroadPhase::Impl::StateCodec {
  // Everything loadState decodes, checked, before it changes anything.
  // Per-slot arrays have one entry per slot (capacity).
  struct Decoded {
    snapshot::Header header;
    std::vector<uint32_t> generations, freeList;
    std::vector<uint8_t> live, flags, renewed;
    std::vector<Aabb> boxes, structureBoxes;
    std::vector<uint64_t> userData;
    std::vector<Filter> filters;
    std::vector<uint8_t> layers;
    LayerTable layerTable;
    std::vector<uint32_t> renewedList;
    std::vector<ProxyPair> pairs, begun, ended;
    // The double section (empty without it): the origin and the double
    // proxies' DAabbs, as the object keeps them (its count from the header).
    DoubleWorld doubles;
  };

  static void save(const BroadPhase::Impl& b, std::vector<std::byte>& out);
  // False, after reporting invalidState, when the bytes are not a snapshot
  // this library wrote (or could have written).
  static bool decode(std::span<const std::byte> bytes, Decoded& d);
  static bool decodeDouble(snapshot::Reader& r, uint64_t pendingCount, Decoded& d);
  static void commit(BroadPhase::Impl& b, Decoded& d);
};

void BroadPhase::Impl::saveState(std::vector<std::byte>& out) const {
  StateCodec::save(*this, out);
}

void BroadPhase::Impl::loadState(std::span<const std::byte> bytes) {
  StateCodec::Decoded d;
  if (!StateCodec::decode(bytes, d)) return;
  StateCodec::commit(*this, d);
}

void BroadPhase::Impl::StateCodec::save(const BroadPhase::Impl& b, std::vector<std::byte>& out) {
  using namespace snapshot;
  const HandlePool& pool = b.pool_;
  const uint32_t cap = pool.capacity();
  const Side& side = *b.structure_;

  Header h;
  h.structure = uint8_t(b.config_.structure);
  h.pairKinematicKinematic = b.config_.pairKinematicKinematic ? 1 : 0;
  h.salt = pool.salt();
  h.maxPairs = b.config_.maxPairs;
  h.capacity = cap;
  h.freeCount = uint32_t(pool.freeList().size());

  std::vector<uint32_t> live;
  live.reserve(cap - h.freeCount);
  std::vector<uint8_t> flags;
  flags.reserve(cap - h.freeCount);
  std::vector<Aabb> structureBoxes;
  // The pending moves of an unmarked list (BroadPhase::Impl::movesUnmarked_).
  std::vector<uint8_t> unmarked(b.movesUnmarked_ ? cap : 0, 0);
  if (b.movesUnmarked_)
    for (const uint32_t i : b.pendingMoves_) unmarked[i] = 1;
  for (uint32_t i = 0; i < cap; ++i) {
    if (!pool.isLiveIndex(i)) continue;
    const uint8_t s = b.state_[i];
    const Rules& r = b.rules_[i];
    uint8_t f = uint8_t(r.motion);
    if (r.filterSlot != kDefaultFilter) {
      f |= kFlagFilter;
      ++h.filterCount;
    }
    if (r.layer != 0) {
      f |= kFlagLayer;
      ++h.layerCount;
    }
    if (s & BroadPhase::Impl::kPendingAdd) f |= kFlagPendingAdd;
    if (s & BroadPhase::Impl::kRehome) f |= kFlagRehome;
    if ((s & BroadPhase::Impl::kPendingMove) || (!unmarked.empty() && unmarked[i]))
      f |= kFlagPendingMove;
    // In the structure: queries see the box it holds there until the update.
    if (!(s & BroadPhase::Impl::kPendingAdd) || (s & BroadPhase::Impl::kRehome)) {
      const Aabb seen = side.visit([&](const auto& st) { return st.box(b.slot_[i]); });
      if (!sameBits(seen, b.boxes_[i])) {
        f |= kFlagStructureBox;
        structureBoxes.push_back(seen);
      }
    }
    live.push_back(i);
    flags.push_back(f);
  }
  h.structureBoxCount = uint32_t(structureBoxes.size());

  std::vector<uint32_t> renewed = b.renewedList_;
  std::sort(renewed.begin(), renewed.end());
  h.renewedCount = uint32_t(renewed.size());

  // The user data a pair end gets back on load: the proxy's now, or 0 for a
  // slot that is free now. Pairs that carried other data list it.
  auto dataNow = [&](uint32_t i) { return pool.isLiveIndex(i) ? b.userData_[i] : 0; };
  std::vector<std::pair<uint64_t, uint64_t>> overrides;
  for (size_t k = 0; k < b.pairs_.size(); ++k) {
    const ProxyPair& p = b.pairs_[k];
    if (p.userDataA != dataNow(p.a)) overrides.push_back({uint64_t(k) << 1, p.userDataA});
    if (p.userDataB != dataNow(p.b)) overrides.push_back({uint64_t(k) << 1 | 1, p.userDataB});
  }
  // Every begun pair is a pair of its frame (both lists sorted by key).
  std::vector<uint64_t> begun;
  const std::span<const ProxyPair> begunNow = b.frame_.begun;  // may be the pair list itself
  begun.reserve(begunNow.size());
  for (size_t j = 0, k = 0; j < begunNow.size(); ++j) {
    while (k + 1 < b.pairs_.size() && b.pairs_[k].key() != begunNow[j].key()) ++k;
    begun.push_back(k);
  }
  h.pairCount = b.pairs_.size();
  h.overrideCount = overrides.size();
  h.begunCount = begun.size();
  h.endedCount = b.ended_.size();

  // The double section: the applied DAabb of every double proxy (a pending
  // add outside the structure has none that anything reads: its pending one
  // stands in, so the encoding stays canonical), and the pending DAabbs that
  // differ from it.
  const DoubleWorld* dw = b.dworld_.get();
  std::vector<uint32_t> doubles, pendingDoubles;
  if (dw != nullptr)
    for (uint32_t i : live) {
      if (!dw->has(i)) continue;
      doubles.push_back(i);
      const uint8_t s = b.state_[i];
      const bool inStructure =
          !(s & BroadPhase::Impl::kPendingAdd) || (s & BroadPhase::Impl::kRehome);
      if (inStructure && !sameBits(dw->pending(i), dw->applied(i))) pendingDoubles.push_back(i);
    }
  const DVec3 origin = b.origin();
  h.doubleWorld = (!doubles.empty() || !sameBits(origin, DVec3{})) ? 1 : 0;
  h.doubleCount = uint32_t(doubles.size());

  const Layout l = layoutOf(h, pendingDoubles.size());
  h.totalBytes = l.end;
  out.clear();
  out.resize(l.end);
  Writer w{out.data() + kHeaderBytes};
  for (uint32_t row : b.config_.layers.rows) w.u32(row);
  for (uint32_t i = 0; i < cap; ++i) w.u32(pool.generations()[i]);
  for (uint32_t i : pool.freeList()) w.u32(i);
  for (uint32_t i : live) w.box(b.boxes_[i]);
  for (uint32_t i : live) w.u64(b.userData_[i]);
  for (uint8_t f : flags) w.u8(f);
  for (uint32_t i : live)
    if (b.rules_[i].filterSlot != kDefaultFilter) {
      const Filter& filter = b.filters_[b.rules_[i].filterSlot];
      w.u64(filter.category);
      w.u64(filter.mask);
    }
  for (uint32_t i : live)
    if (b.rules_[i].layer != 0) w.u8(b.rules_[i].layer);
  for (const Aabb& box : structureBoxes) w.box(box);
  for (uint32_t i : renewed) w.u32(i);
  for (const ProxyPair& p : b.pairs_) {
    w.u32(p.a);
    w.u32(p.b);
  }
  for (const auto& [key, data] : overrides) {
    w.u64(key);
    w.u64(data);
  }
  for (uint64_t k : begun) w.u64(k);
  for (const ProxyPair& p : b.ended_) {
    w.u32(p.a);
    w.u32(p.b);
    w.u64(p.userDataA);
    w.u64(p.userDataB);
  }
  if (h.doubleWorld != 0) {
    w.dvec(origin);
    w.u64(pendingDoubles.size());
    for (uint32_t i : doubles) {
      const uint8_t s = b.state_[i];
      const bool inStructure =
          !(s & BroadPhase::Impl::kPendingAdd) || (s & BroadPhase::Impl::kRehome);
      w.u32(i);
      w.dbox(inStructure ? dw->applied(i) : dw->pending(i));
    }
    for (uint32_t i : pendingDoubles) {
      w.u32(i);
      w.dbox(dw->pending(i));
    }
  }
  writeHeader(h, out.data());
  seal(out);
}

bool BroadPhase::Impl::StateCodec::decode(std::span<const std::byte> bytes, Decoded& d) {
  using namespace snapshot;
  auto fail = [](const std::string& why) {
    reportError(ErrorCode::invalidState, "loadState: " + why);
    return false;
  };
  const uint64_t size = bytes.size();
  if (size < kHeaderBytes)
    return fail("truncated: " + str(size) + " bytes, less than the " + str(kHeaderBytes) +
                "-byte header");
  const Header h = readHeader(bytes.data());
  if (h.magic != kMagic) return fail("not a broadphase snapshot (bad magic number)");
  if (h.version != kVersion)
    return fail("format version " + str(h.version) + "; this library reads version " +
                str(kVersion));
  if (h.totalBytes != size)
    return fail("the header says " + str(h.totalBytes) + " bytes but " + str(size) +
                " were given (truncated or extended)");
  if (checksum(bytes.subspan(kChecksummedFrom)) != h.checksum)
    return fail("checksum mismatch: the bytes are corrupted");
  if (h.structure > uint8_t(Structure::automatic))
    return fail("unknown structure " + str(h.structure));
  if (h.pairKinematicKinematic > 1)
    return fail("pairKinematicKinematic is " + str(h.pairKinematicKinematic) + ", not 0 or 1");
  if (h.doubleWorld > 1) return fail("doubleWorld is " + str(h.doubleWorld) + ", not 0 or 1");
  if (h.doubleWorld == 0 && h.doubleCount != 0)
    return fail(str(h.doubleCount) + " double proxies without a double section");
  if (h.freeCount > h.capacity)
    return fail(str(h.freeCount) + " free slots in a pool of " + str(h.capacity));
  // Each count is at most the size, so the layout's sums cannot overflow.
  for (uint64_t count : {uint64_t(h.filterCount), uint64_t(h.structureBoxCount),
                         uint64_t(h.renewedCount), uint64_t(h.doubleCount), h.pairCount,
                         h.overrideCount, h.begunCount, h.endedCount, h.layerCount})
    if (count > size)
      return fail("a section count (" + str(count) + ") exceeds the snapshot's " + str(size) +
                  " bytes");
  // The double section's pendingCount, read where the header's counts put it.
  uint64_t pendingDoubles = 0;
  if (h.doubleWorld != 0) {
    const uint64_t at = layoutOf(h).doubles + 24;
    if (at + 8 > size)
      return fail("the header's counts leave no room for the double section in " + str(size) +
                  " bytes");
    pendingDoubles = load<uint64_t>(bytes.data() + at);
    if (pendingDoubles > size)
      return fail("a section count (" + str(pendingDoubles) + ") exceeds the snapshot's " +
                  str(size) + " bytes");
  }
  const Layout l = layoutOf(h, pendingDoubles);
  if (l.end != size)
    return fail("the header's counts add up to " + str(l.end) + " bytes, not " + str(size));

  d.header = h;
  const uint32_t cap = h.capacity;
  Reader r{bytes.data() + kHeaderBytes};
  for (uint32_t& row : d.layerTable.rows) row = r.u32();
  if (const std::string asymmetry = asymmetryOf(d.layerTable); !asymmetry.empty())
    return fail(asymmetry);
  d.generations.resize(cap);
  for (uint32_t& g : d.generations) g = r.u32();
  d.live.assign(cap, 1);
  d.freeList.resize(h.freeCount);
  for (uint32_t k = 0; k < h.freeCount; ++k) {
    const uint32_t i = r.u32();
    if (i >= cap)
      return fail("free list entry " + str(k) + " names slot " + str(i) + " of " + str(cap));
    if (!d.live[i]) return fail("free list holds slot " + str(i) + " twice");
    d.live[i] = 0;
    d.freeList[k] = i;
  }
  std::vector<uint32_t> live;
  live.reserve(cap - h.freeCount);
  for (uint32_t i = 0; i < cap; ++i)
    if (d.live[i]) live.push_back(i);

  d.boxes.assign(cap, Aabb{Vec3::Zero(), Vec3::Zero()});
  for (uint32_t i : live) {
    d.boxes[i] = r.box();
    if (!isValid(d.boxes[i])) return fail("proxy " + str(i) + ": " + describeInvalid(d.boxes[i]));
  }
  d.userData.assign(cap, 0);
  for (uint32_t i : live) d.userData[i] = r.u64();
  d.flags.assign(cap, 0);
  uint64_t filters = 0, structureBoxes = 0, layers = 0;
  for (uint32_t i : live) {
    const uint8_t f = r.u8();
    const std::string at = "proxy " + str(i) + ": ";
    if ((f & kFlagMotion) > uint8_t(MotionType::dynamic))
      return fail(at + "motion type " + str(f & kFlagMotion) + " is none of the three");
    const bool pendingAdd = f & kFlagPendingAdd, rehome = f & kFlagRehome;
    if (rehome && !pendingAdd) return fail(at + "rehomed but not pending");
    if ((f & kFlagPendingMove) && pendingAdd) return fail(at + "a pending move and a pending add");
    if ((f & kFlagStructureBox) && pendingAdd && !rehome)
      return fail(at + "a box in the structure but not in the structure");
    if ((f & kFlagStructureBox) && !pendingAdd && !(f & kFlagPendingMove))
      return fail(at + "a box in the structure other than its own, with no move pending");
    filters += (f & kFlagFilter) != 0;
    structureBoxes += (f & kFlagStructureBox) != 0;
    layers += (f & kFlagLayer) != 0;
    d.flags[i] = f;
  }
  if (filters != h.filterCount || structureBoxes != h.structureBoxCount || layers != h.layerCount)
    return fail("the flags name " + str(filters) + " filters, " + str(structureBoxes) +
                " structure boxes and " + str(layers) + " layers, the header " +
                str(h.filterCount) + ", " + str(h.structureBoxCount) + " and " + str(h.layerCount));
  d.filters.assign(cap, Filter{});
  for (uint32_t i : live)
    if (d.flags[i] & kFlagFilter) {
      d.filters[i].category = r.u64();
      d.filters[i].mask = r.u64();
      if (isDefaultFilter(d.filters[i]))
        return fail("proxy " + str(i) + ": a default filter listed");
    }
  d.layers.assign(cap, 0);
  for (uint32_t i : live)
    if (d.flags[i] & kFlagLayer) {
      d.layers[i] = r.u8();
      if (d.layers[i] == 0 || d.layers[i] >= kMaxLayers)
        return fail("proxy " + str(i) + ": layer " + str(d.layers[i]) +
                    " listed (a listed layer is 1 to " + str(kMaxLayers - 1) + ")");
    }
  d.structureBoxes.assign(cap, Aabb{Vec3::Zero(), Vec3::Zero()});
  for (uint32_t i : live)
    if (d.flags[i] & kFlagStructureBox) {
      const Aabb box = r.box();
      const std::string at = "proxy " + str(i) + ": structure box: ";
      if (!isValid(box)) return fail(at + describeInvalid(box));
      if (sameBits(box, d.boxes[i])) return fail(at + "the same as its box");
      d.structureBoxes[i] = box;
    }

  d.renewed.assign(cap, 0);
  d.renewedList.resize(h.renewedCount);
  for (uint32_t k = 0; k < h.renewedCount; ++k) {
    const uint32_t i = r.u32();
    if (i >= cap || (k > 0 && i <= d.renewedList[k - 1]))
      return fail("renewed entry " + str(k) + " (" + str(i) + ") is out of range or not ascending");
    d.renewedList[k] = i;
    d.renewed[i] = 1;
  }

  // A pair of the last frame names proxies that were in the structure then:
  // still there, or removed since (renewed).
  auto wasInFrame = [&](uint32_t i) {
    return d.renewed[i] ||
           (d.live[i] && (!(d.flags[i] & kFlagPendingAdd) || (d.flags[i] & kFlagRehome)));
  };
  auto dataNow = [&](uint32_t i) { return d.live[i] ? d.userData[i] : 0; };
  d.pairs.resize(h.pairCount);
  for (uint64_t k = 0; k < h.pairCount; ++k) {
    ProxyPair p;
    p.a = r.u32();
    p.b = r.u32();
    const std::string at = "pair " + str(k) + " (" + str(p.a) + ", " + str(p.b) + "): ";
    if (!(p.a < p.b) || p.b >= cap) return fail(at + "not a < b < " + str(cap));
    if (k > 0 && p.key() <= d.pairs[k - 1].key()) return fail(at + "not in ascending order");
    if (!wasInFrame(p.a) || !wasInFrame(p.b))
      return fail(at + "names a proxy that was not in the last frame");
    p.userDataA = dataNow(p.a);
    p.userDataB = dataNow(p.b);
    d.pairs[k] = p;
  }
  for (uint64_t k = 0, last = 0; k < h.overrideCount; ++k) {
    const uint64_t key = r.u64(), data = r.u64();
    const uint64_t pair = key >> 1;
    if (pair >= h.pairCount || (k > 0 && key <= last))
      return fail("user data override " + str(k) + " is out of range or not ascending");
    last = key;
    uint64_t& slot = (key & 1) ? d.pairs[pair].userDataB : d.pairs[pair].userDataA;
    if (slot == data) return fail("user data override " + str(k) + " overrides nothing");
    slot = data;
  }
  d.begun.resize(h.begunCount);
  for (uint64_t k = 0, last = 0; k < h.begunCount; ++k) {
    const uint64_t pair = r.u64();
    if (pair >= h.pairCount || (k > 0 && pair <= last))
      return fail("begun entry " + str(k) + " is out of range or not ascending");
    last = pair;
    d.begun[k] = d.pairs[pair];
  }
  d.ended.resize(h.endedCount);
  for (uint64_t k = 0; k < h.endedCount; ++k) {
    ProxyPair p;
    p.a = r.u32();
    p.b = r.u32();
    p.userDataA = r.u64();
    p.userDataB = r.u64();
    if (!(p.a < p.b) || p.b >= cap || (k > 0 && p.key() <= d.ended[k - 1].key()))
      return fail("ended pair " + str(k) + " (" + str(p.a) + ", " + str(p.b) + ") is not a < b < " +
                  str(cap) + " in ascending order");
    d.ended[k] = p;
  }
  return h.doubleWorld == 0 || decodeDouble(r, pendingDoubles, d);
}

// The double section: every double proxy live and listed once, its DAabbs
// valid, and its float boxes (its own and the one queries see) the outward
// rounding of its pending and applied DAabb around the origin, as the
// double path keeps them.
bool BroadPhase::Impl::StateCodec::decodeDouble(snapshot::Reader& r, uint64_t pendingCount,
                                                Decoded& d) {
  using namespace snapshot;
  auto fail = [](const std::string& why) {
    reportError(ErrorCode::invalidState, "loadState: " + why);
    return false;
  };
  const uint32_t cap = d.header.capacity, count = d.header.doubleCount;
  DoubleWorld& w = d.doubles;
  w.origin = r.dvec();
  (void)r.u64();  // pendingCount, read by decode()
  if (!isFinite(w.origin))
    return fail("the origin " + toString(DAabb{w.origin, w.origin}) + " is not finite");
  if (count == 0 && sameBits(w.origin, DVec3{}))
    return fail("a double section with no double proxy and a zero origin");
  for (uint32_t k = 0, last = 0; k < count; ++k) {
    const uint32_t i = r.u32();
    const DAabb box = r.dbox();
    if (i >= cap || !d.live[i] || (k > 0 && i <= last))
      return fail("double proxy entry " + str(k) + " (" + str(i) +
                  ") is not a live proxy in ascending order");
    last = i;
    if (!isValid(box)) return fail("double proxy " + str(i) + ": " + describeInvalid(box));
    w.markApplied(i, box);
  }
  for (uint64_t k = 0, last = 0; k < pendingCount; ++k) {
    const uint32_t i = r.u32();
    const DAabb box = r.dbox();
    if (i >= cap || !w.has(i) || (k > 0 && i <= last))
      return fail("pending double box entry " + str(k) + " (" + str(i) +
                  ") is not a double proxy in ascending order");
    last = i;
    const std::string at = "double proxy " + str(i) + ": pending box: ";
    if (!isValid(box)) return fail(at + describeInvalid(box));
    const uint8_t f = d.flags[i];
    if (!(f & kFlagPendingMove) && !(f & kFlagRehome))
      return fail(at + "listed for a proxy with no pending move (or not in the structure)");
    if (sameBits(box, w.applied(i))) return fail(at + "the same as its applied box");
    w.setPending(i, box);
  }
  std::string why;
  w.forEachDouble([&](uint32_t i) {
    if (!why.empty()) return;
    const std::string at = "double proxy " + str(i) + ": ";
    if (!sameBits(d.boxes[i], roundOutward(w.pending(i), w.origin))) {
      why = at + "its box is not its pending DAabb rounded outward around the origin";
      return;
    }
    const uint8_t f = d.flags[i];
    const bool inStructure = !(f & kFlagPendingAdd) || (f & kFlagRehome);
    const Aabb& seen = (f & kFlagStructureBox) ? d.structureBoxes[i] : d.boxes[i];
    if (inStructure && !sameBits(seen, roundOutward(w.applied(i), w.origin)))
      why = at + "the box queries see is not its applied DAabb rounded outward around the origin";
  });
  return why.empty() || fail(why);
}

// Builds the new structure and lists aside, then moves everything in: an
// allocation failure on the way leaves the object as it was.
void BroadPhase::Impl::StateCodec::commit(BroadPhase::Impl& b, Decoded& d) {
  using namespace snapshot;
  const uint32_t cap = d.header.capacity;
  std::vector<Rules> rules(cap);
  FilterStore filters;
  std::vector<uint32_t> slots(cap, kNullIndex);
  std::vector<uint8_t> state(cap, 0);
  std::vector<uint32_t> pendingAdds, pendingMoves;
  std::vector<ProxyId> pendingRemoves;
  uint32_t special = 0;
  std::unique_ptr<Side> structure = b.makeStructure();
  structure->visit([&](auto& s) { s.setLayerTable(d.layerTable); });
  for (uint32_t i = 0; i < cap; ++i) {
    if (!d.live[i]) continue;
    const uint8_t f = d.flags[i];
    const MotionType motion = MotionType(f & kFlagMotion);
    rules[i] = {filters.set(kDefaultFilter, d.filters[i]), motion, d.layers[i]};
    special += isSpecial(motion, d.filters[i]);
    const bool pendingAdd = f & kFlagPendingAdd, rehome = f & kFlagRehome;
    if (!pendingAdd || rehome) {
      // A rehomed proxy's old place (the part of its old motion type, its
      // old layer) is not saved: queries look at neither, and the update
      // takes it out of wherever it is. It goes where its rules say now.
      slots[i] = structure
                     ->add((f & kFlagStructureBox) ? d.structureBoxes[i] : d.boxes[i],
                           motion == MotionType::staticBody, d.layers[i], i)
                     .index;
    }
    if (pendingAdd) {
      state[i] = uint8_t(kPendingAdd | (rehome ? kRehome : 0));
      pendingAdds.push_back(i);
      if (rehome) pendingRemoves.push_back(structure->handleOf(slots[i]));
    } else {
      const bool moved = f & kFlagPendingMove;
      state[i] = uint8_t(kInStructure | (moved ? kPendingMove : 0));
      if (moved) pendingMoves.push_back(i);
    }
  }
  structure->update(*b.scheduler_);  // queries answer at once, as after shiftOrigin
  std::unique_ptr<DoubleWorld> dworld;
  if (d.header.doubleWorld != 0) {
    dworld = std::make_unique<DoubleWorld>(std::move(d.doubles));
    dworld->count = d.header.doubleCount;
    special += dworld->count;  // their pairs are decided in double (markDouble)
  }

  // (restore() allocates before it changes the pool; the rest only moves.)
  b.pool_.restore(std::move(d.generations), std::move(d.freeList), d.header.salt);
  b.config_.maxPairs = d.header.maxPairs;
  b.config_.layers = d.layerTable;
  b.config_.pairKinematicKinematic = d.header.pairKinematicKinematic != 0;
  b.structure_ = std::move(structure);
  b.dworld_ = std::move(dworld);
  b.boxes_ = std::move(d.boxes);
  b.userData_ = std::move(d.userData);
  b.rules_ = std::move(rules);
  b.filters_ = std::move(filters);
  b.special_ = special;
  b.slot_ = std::move(slots);
  b.state_ = std::move(state);
  b.renewed_ = std::move(d.renewed);
  b.renewedList_ = std::move(d.renewedList);
  b.pendingAdds_ = std::move(pendingAdds);
  b.pendingMoves_ = std::move(pendingMoves);
  b.pendingRemoves_ = std::move(pendingRemoves);
  b.movesDropped_ = false;
  b.movesUnmarked_ = false;   // (the pending moves above carry their marks)
  b.userDataChanged_ = true;  // the loaded pairs carry their own frame's user data
  b.pairs_ = std::move(d.pairs);
  b.begun_ = std::move(d.begun);
  b.ended_ = std::move(d.ended);
  b.previous_.clear();
  b.frame_ = {b.pairs_, b.begun_, b.ended_};
  if (b.view_) b.view_->rebuild(b);  // concurrentQueries: queries see the loaded frame
}

}  // namespace bp
