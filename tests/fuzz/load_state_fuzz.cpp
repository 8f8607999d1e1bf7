// libFuzzer target for BroadPhase::loadState. The first byte picks how the
// rest becomes a snapshot:
//   bit 0 clear: the rest is the snapshot as it is (bit 1 set: its checksum
//                redone first, so that the contents are judged);
//   bit 0 set:   the rest builds a small world (a layer table, adds, moves,
//                removes, filters, motion and layer changes, updates),
//                which is saved; the
//                remaining bytes are (offset, value) pairs written into that
//                snapshot, and the checksum is redone (unless bit 1 is set).
// The loading object holds a world of its own. A rejected load must report
// invalidState once and leave that object as it was (its saveState is the
// same bytes, validate() passes); an accepted one must give a valid object
// whose own snapshot is the input again (the encoding is canonical) and that
// updates and answers rays. Errors go to a recording handler, so the target
// runs the same with and without exceptions.
//
// Build: clang++ with -DBP_FUZZ=ON (see tests/CMakeLists.txt); run:
//   build/fuzz/tests/load_state_fuzz -max_total_time=60 tests/fuzz/load_state_corpus
#include <broadphase/broad_phase.h>

#include "facade/state_codec.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace {

struct Reports {
  int count = 0;
  bp::ErrorCode code{};
  std::string message;
  int take() { return std::exchange(count, 0); }
};

void record(bp::ErrorCode code, const char* message, void* context) {
  Reports& r = *static_cast<Reports*>(context);
  ++r.count;
  r.code = code;
  r.message = message;
}

void fail(const std::string& what) {
  std::fprintf(stderr, "load_state_fuzz: %s\n", what.c_str());
  std::abort();
}

struct Input {
  const uint8_t* data;
  size_t size;
  size_t at = 0;
  bool empty() const { return at >= size; }
  uint8_t byte() { return at < size ? data[at++] : 0; }
};

bp::Aabb smallBox(Input& in) {
  const bp::Vec3 lo(float(in.byte() % 16), float(in.byte() % 16), float(in.byte() % 4));
  return {lo, lo + bp::Vec3(1 + float(in.byte() % 3), 1, 1)};
}

// A world from the input: a layer table over layers 0-3, then up to 48
// calls, valid ones only.
std::vector<std::byte> savedWorld(Input& in, bp::Structure structure) {
  bp::LayerTable table;
  const uint8_t apart = in.byte();  // bit k: the k-th pair of layers 0-3 does not collide
  for (uint32_t a = 0, k = 0; a < 4; ++a)
    for (uint32_t b = a; b < 4; ++b, ++k)
      if ((apart >> (k % 8)) & 1) table.set(a, b, false);
  bp::BroadPhase world({.structure = structure, .threads = 1, .layers = table});
  std::vector<bp::ProxyId> ids;
  const int calls = 4 + in.byte() % 45;
  for (int c = 0; c < calls && !in.empty(); ++c) {
    const uint8_t op = in.byte() % 8;
    if (op <= 2 || ids.empty()) {
      ids.push_back(world.add({.box = smallBox(in),
                               .motion = bp::MotionType(in.byte() % 3),
                               .userData = in.byte(),
                               .layer = uint32_t(in.byte() % 4)}));
      continue;
    }
    const size_t k = in.byte() % ids.size();
    if (op == 3) {
      world.remove(ids[k]);
      ids.erase(ids.begin() + long(k));
    } else if (op == 4) {
      world.move(ids[k], smallBox(in));
    } else if (op == 5) {
      world.setFilter(ids[k], {.category = uint64_t(1) << (in.byte() % 3), .mask = in.byte()});
      world.setUserData(ids[k], in.byte());
    } else if (op == 6) {
      const uint8_t v = in.byte();
      if (v & 1)
        world.setMotionType(ids[k], bp::MotionType(v / 2 % 3));
      else
        world.setLayer(ids[k], v / 2 % 32);
    } else {
      world.update();
    }
  }
  std::vector<std::byte> out;
  world.saveState(out);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Reports reports;
  bp::setErrorHandler(&record, &reports);
  reports.take();
  if (size == 0) return 0;
  Input in{data, size};
  const uint8_t mode = in.byte();
  const bp::Structure structure = bp::Structure(mode / 4 % 3);

  std::vector<std::byte> bytes;
  if ((mode & 1) == 0) {
    bytes.assign(reinterpret_cast<const std::byte*>(data) + 1,
                 reinterpret_cast<const std::byte*>(data) + size);
    if ((mode & 2) && bytes.size() >= bp::snapshot::kHeaderBytes) bp::snapshot::seal(bytes);
  } else {
    bytes = savedWorld(in, structure);
    while (!in.empty()) {
      const size_t offset = (size_t(in.byte()) | size_t(in.byte()) << 8) % bytes.size();
      bytes[offset] = std::byte(in.byte());
    }
    if (!(mode & 2)) bp::snapshot::seal(bytes);
  }
  if (reports.take() != 0) fail("building the world reported: " + reports.message);

  bp::BroadPhase target({.structure = bp::Structure((mode / 16) % 3), .threads = 1});
  for (int k = 0; k < 5; ++k)
    target.add({.box = {bp::Vec3(float(k), 0, 0), bp::Vec3(float(k) + 1.5f, 1, 1)}});
  target.update();
  std::vector<std::byte> before, after;
  target.saveState(before);

  target.loadState(bytes);
  const int reported = reports.take();
  if (reported > 1) fail("loadState reported more than once");
  if (reported == 1) {
    if (reports.code != bp::ErrorCode::invalidState)
      fail("loadState reported another code: " + reports.message);
    target.saveState(after);
    if (after != before) fail("a rejected loadState changed the object: " + reports.message);
    if (!target.validate().empty()) fail("after a rejected load: " + target.validate());
    return 0;
  }
  if (!target.validate().empty()) fail("after a load: " + target.validate());
  target.saveState(after);
  bytes[24] = std::byte(uint8_t(target.structure()));  // the saver's structure
  bp::snapshot::seal(bytes);
  if (after != bytes) fail("the loaded object saves other bytes than it loaded");
  target.update();
  if (reports.take() != 0 && reports.code != bp::ErrorCode::capacityExceeded)
    fail("update after a load reported: " + reports.message);
  if (!target.validate().empty()) fail("after the update: " + target.validate());
  (void)target.castRay(bp::Vec3(-1, 0.5f, 0.5f), bp::Vec3(1, 0, 0), 100.0f);
  if (reports.take() != 0) fail("a ray after a load reported: " + reports.message);
  return 0;
}
