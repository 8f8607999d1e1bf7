// libFuzzer target: bytes become a sequence of add / remove / move / update /
// query calls on a BroadPhase with arbitrary floats (NaN, inf, inverted and
// huge boxes included) and filters, checked against a brute-force model.
// Rejected calls go to an error handler that records them (so the target
// runs the same with and without exceptions): a rejected call must be
// reported once, return its fallback value and change nothing; after every
// update the pairs must equal the model's and validate() must pass.
//
// Build: clang++ with -DBP_FUZZ=ON (see tests/CMakeLists.txt); run:
//   build/fuzz/tests/broad_phase_fuzz -max_total_time=60 tests/fuzz/corpus
#include <broadphase/broad_phase.h>
#include <broadphase/testkit/brute_force.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

struct Reader {
  const uint8_t* data;
  size_t size;
  size_t at = 0;
  bool empty() const { return at >= size; }
  uint8_t byte() { return at < size ? data[at++] : 0; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t(byte()) << (8 * i);
    return v;
  }
  // Mostly small coordinates on a coarse lattice (so boxes touch and overlap,
  // exactly), sometimes raw bit patterns (NaN, inf, denormals, 1e38).
  float coord() {
    const uint8_t mode = byte();
    if (mode < 200) return float(int(byte()) - 128) * 0.25f;
    if (mode < 240) return float(int(byte()) - 128) * 1000.0f;
    const uint32_t bits = u32();
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  bp::Aabb box() {
    bp::Vec3 lo(coord(), coord(), coord());
    const uint8_t shape = byte();
    bp::Vec3 hi;
    if (shape < 220) {
      hi = lo +
           bp::Vec3(float(shape % 16) * 0.25f, float((shape / 16) % 8) * 0.5f, float(shape % 5));
    } else {
      hi = bp::Vec3(coord(), coord(), coord());  // may be inverted
    }
    return {lo, hi};
  }
};

void fail(const char* what) {
  std::fprintf(stderr, "broad_phase_fuzz: %s\n", what);
  std::abort();
}

// What the error handler saw since the last take().
struct Reports {
  int count = 0;
  bp::ErrorCode code{};
  std::string message;
  // The reports since the last call, then none.
  int take() { return std::exchange(count, 0); }
};

void record(bp::ErrorCode code, const char* message, void* context) {
  Reports& r = *static_cast<Reports*>(context);
  ++r.count;
  r.code = code;
  r.message = message;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Reports reports;
  bp::setErrorHandler(&record, &reports);
  reports.take();
  Reader in{data, size};
  const uint8_t head = in.byte();
  const bp::Structure structure = head % 3 == 0   ? bp::Structure::bvh
                                  : head % 3 == 1 ? bp::Structure::sweep
                                                  : bp::Structure::automatic;
  bp::BroadPhase bp({.structure = structure,
                     .threads = 1 + (head / 3) % 2,
                     .pairKinematicKinematic = (head & 0x40) != 0});

  // The model, indexed like the broadphase.
  std::vector<bp::ProxyId> handle;
  std::vector<bp::ProxyDesc> desc;
  std::vector<uint8_t> live;
  std::vector<bp::ProxyId> handles;  // live handles, in insertion order

  auto expectedPairs = [&] {
    std::vector<bp::Pair> out;
    for (uint32_t i = 0; i < desc.size(); ++i)
      for (uint32_t j = i + 1; j < desc.size(); ++j) {
        if (!live[i] || !live[j]) continue;
        const bp::ProxyDesc &a = desc[i], &b = desc[j];
        using M = bp::MotionType;
        if (!a.filter.accepts(b.filter) || !bp::overlaps(a.box, b.box)) continue;
        if (a.motion == M::staticBody && b.motion == M::staticBody) continue;
        if ((a.motion == M::kinematic && b.motion == M::staticBody) ||
            (a.motion == M::staticBody && b.motion == M::kinematic))
          continue;
        if (a.motion == M::kinematic && b.motion == M::kinematic && (head & 0x40) == 0) continue;
        out.push_back({i, j});
      }
    return out;
  };
  std::vector<bp::Aabb> committed;  // boxes as of the last update (what queries see)
  std::vector<uint8_t> committedLive;

  const bool trace = std::getenv("BP_FUZZ_TRACE") != nullptr;
  int ops = 0;
  while (!in.empty() && ops++ < 400) {
    const uint8_t op = in.byte() % 8;
    if (op <= 2 || handles.empty()) {
      bp::ProxyDesc d;
      d.box = in.box();
      d.motion = bp::MotionType(in.byte() % 3);
      d.filter.category = uint64_t(1) << (in.byte() % 3);
      d.filter.mask = in.byte() < 200 ? ~uint64_t(0) : uint64_t(in.byte());
      d.userData = ops;
      const bool valid = bp::isValid(d.box);
      const bp::ProxyId id = bp.add(d);
      const bool rejected = reports.take() != 0;
      if (rejected == valid) fail("add: error reported for a valid box or not for an invalid one");
      if (rejected &&
          (reports.code != bp::ErrorCode::invalidBox || !(id == bp::ProxyId{}) || bp.contains(id)))
        fail("add: a rejected add must report invalidBox and return ProxyId{}");
      if (!rejected) {
        if (id.index >= desc.size()) {
          desc.resize(id.index + 1);
          live.resize(id.index + 1);
          handle.resize(id.index + 1);
        }
        desc[id.index] = d;
        live[id.index] = 1;
        if (trace)
          std::fprintf(stderr, "add %u motion %d %s\n", id.index, int(d.motion),
                       bp::toString(d.box).c_str());
        handle[id.index] = id;
        handles.push_back(id);
      }
    } else if (op == 3) {
      const size_t k = in.byte() % handles.size();
      const bp::ProxyId id = handles[k];
      bp.remove(id);
      live[id.index] = 0;
      // Queries never report a removed proxy, even before the next update.
      if (id.index < committedLive.size()) committedLive[id.index] = 0;
      if (trace) std::fprintf(stderr, "remove %u\n", id.index);
      handles.erase(handles.begin() + long(k));
      if (reports.take() != 0) fail(("remove: " + reports.message).c_str());
      bp.remove(id);  // double remove
      if (reports.take() != 1 || reports.code != bp::ErrorCode::staleHandle)
        fail("double remove not rejected");
    } else if (op == 4 || op == 5) {
      const bp::ProxyId id = handles[in.byte() % handles.size()];
      const bp::Aabb b = in.box();
      bp.move(id, b);
      const bool rejected = reports.take() != 0;
      if (rejected == bp::isValid(b)) fail("move: wrong acceptance");
      if (!rejected) desc[id.index].box = b;  // a rejected move changed nothing
      if (trace && !rejected)
        std::fprintf(stderr, "move %u %s\n", id.index, bp::toString(b).c_str());
    } else if (op == 6) {
      if (trace) std::fprintf(stderr, "update\n");
      const bp::FramePairs& f = bp.update();
      std::vector<bp::Pair> got;
      for (const bp::ProxyPair& p : f.pairs) got.push_back({p.a, p.b});
      if (got != expectedPairs()) fail("pairs differ from the model");
      committed.assign(desc.size(), bp::Aabb{});
      committedLive = live;
      // A ray query uses the default filter: a proxy whose mask refuses it
      // is not a candidate.
      for (uint32_t i = 0; i < desc.size(); ++i) {
        committed[i] = desc[i].box;
        if (!bp::Filter{}.accepts(desc[i].filter)) committedLive[i] = 0;
      }
    } else if (!committed.empty()) {
      // A ray through the committed world; closest hit equals brute force.
      const bp::Vec3 o(in.coord(), in.coord(), in.coord());
      const bp::Vec3 d(in.coord(), in.coord(), in.coord());
      const float len = in.coord();
      const bool valid = bp::describeInvalidRay(o, d, len).empty();
      const bp::RayHit hit = bp.castRay(o, d, len);
      const bool rejected = reports.take() != 0;
      if (rejected == valid) fail(("castRay: wrong acceptance: " + reports.message).c_str());
      if (rejected && hit.hit()) fail("castRay: a rejected ray must return a miss");
      if (!rejected) {
        const bp::RayHit want =
            bp::brute::castRayClosest(committed, bp::makeRay(o, d, len), committedLive);
        if (!(hit == want)) {
          char text[512];
          std::snprintf(text, sizeof text,
                        "closest hit differs from brute force (structure %d): ray o=(%.9g %.9g "
                        "%.9g) d=(%.9g %.9g %.9g) len=%.9g: got %u at %.9g, want %u at %.9g",
                        int(structure), o.x(), o.y(), o.z(), d.x(), d.y(), d.z(), len, hit.proxy,
                        hit.t, want.proxy, want.t);
          if (want.hit() && std::getenv("BP_FUZZ_DEBUG")) {
            const bp::Aabb& c = committed[want.proxy];
            std::fprintf(stderr, "committed box %u: %s; desc now %s; motion %d\n", want.proxy,
                         bp::toString(c).c_str(), bp::toString(desc[want.proxy].box).c_str(),
                         int(desc[want.proxy].motion));
            bp.queryPoint(o, [&](uint32_t p) {
              std::fprintf(stderr, "  point query at the origin finds %u\n", p);
              return true;
            });
            std::vector<bp::RayHit> all;
            bp.castRayAll(o, d, len, all);
            for (const bp::RayHit& h : all)
              std::fprintf(stderr, "  all-hits: %u at %g\n", h.proxy, h.t);
          }
          fail(text);
        }
      }
    }
    // The model only makes valid calls outside the checks above.
    if (reports.take() != 0) fail(reports.message.c_str());
    if (!bp.validate().empty()) fail(bp.validate().c_str());
  }
  return 0;
}
