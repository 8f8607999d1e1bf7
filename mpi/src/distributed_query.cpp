// DistributedBroadPhase's queries. Each follows one pattern: every rank's
// queries are gathered on every rank (one all-gather), each rank answers the
// ones its region can answer from its own BroadPhase (owned proxies and
// ghosts), and the answers go back to the asking rank (one sparse exchange),
// which reduces them. Ties are broken by global id, never by a rank's local
// index, so the result is the same for any number of ranks.
#include <broadphase/mpi/distributed_broad_phase.h>

#include "exchange.h"
#include "fail.h"
#include "scratch.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace bp::mpi {

using detail::ByteReader;
using detail::ByteWriter;
using detail::fail;
using detail::Traffic;

namespace {

enum : int { kTagQuery = 21 };

// The flag a rank with bad queries raises in the all-gather: one bit per
// rank (ranks past 61 share bit 61), so that every rank can name the lowest
// one at fault; bit 62 when the fault is a bad argument rather than a bad
// ray or box. Bit 63 is allGather's: too many bytes.
constexpr uint64_t kArgumentBit = uint64_t(1) << 62;
constexpr uint64_t kTooLargeBit = uint64_t(1) << 63;
uint64_t faultBits(int rank, bool argument) {
  return (uint64_t(1) << std::min(rank, 61)) | (argument ? kArgumentBit : 0);
}
int lowestFault(uint64_t flags) {
  int r = 0;
  while (r < 61 && !(flags & (uint64_t(1) << r))) ++r;
  return r;
}

// Throws the same code on every rank when any rank's queries were bad (with
// its own message on the rank at fault, a pointer to it elsewhere).
void agreeOnErrors(uint64_t flags, ErrorCode code, const std::string& mine, const char* what) {
  if (flags & kTooLargeBit)
    fail(ErrorCode::capacityExceeded, std::string(what) + ": over 2 GiB of queries at once");
  if (flags == 0) return;
  if (flags & kArgumentBit) code = ErrorCode::invalidArgument;
  if (!mine.empty()) fail(code, mine);
  fail(code, std::string(what) + ": rank " + std::to_string(lowestFault(flags)) +
                 " passed an invalid query; nothing was answered");
}

std::span<const std::byte> slice(const std::vector<std::byte>& all,
                                 const std::vector<uint64_t>& offsets, int r) {
  return std::span<const std::byte>(all).subspan(offsets[size_t(r)],
                                                 offsets[size_t(r) + 1] - offsets[size_t(r)]);
}

// True when the segment may pass through the region: the slab test against
// the region grown by a relative tolerance, so that a ray grazing a region
// boundary is answered by both sides (an extra answer costs a local cast,
// a missing one a wrong result).
bool segmentMayCross(const Ray& ray, const Region& region) {
  const float scale = ray.origin.cwiseAbs().maxCoeff() + ray.maxT;
  const float tol = 1e-4f * scale + 1e-30f;
  const Vec3 t(tol, tol, tol);
  float tMin = 0.0f;
  float tMax = ray.maxT;
  return clipRayAabb(ray.origin, ray.invDirection, Aabb{region.lo - t, region.hi + t}, tMin, tMax);
}

}  // namespace

void DistributedBroadPhase::castRays(std::span<const RayInput> rays, std::span<GlobalHit> out,
                                     const Filter& filter) const {
  Scratch& s = *scratch_;
  Traffic traffic;
  std::string bad;
  bool argument = false;
  if (out.size() != rays.size()) {
    bad = "castRays: " + std::to_string(rays.size()) + " rays but " + std::to_string(out.size()) +
          " results on rank " + std::to_string(rank_);
    argument = true;
  }
  for (size_t k = 0; k < rays.size() && bad.empty(); ++k)
    if (std::string why = describeInvalidRay(rays[k].origin, rays[k].direction, rays[k].length);
        !why.empty())
      bad = "castRays: ray " + std::to_string(k) + " on rank " + std::to_string(rank_) + ": " + why;
  s.bytes.clear();
  ByteWriter w(s.bytes);
  if (bad.empty()) {
    for (const RayInput& r : rays) {
      w.put(r.origin);
      w.put(r.direction);
      w.put(r.length);
    }
  }
  std::vector<std::byte> all;
  std::vector<uint64_t> offsets;
  const uint64_t flags = detail::allGather(
      comm_, s.bytes, bad.empty() ? 0 : faultBits(rank_, argument), all, offsets, traffic);
  agreeOnErrors(flags, ErrorCode::invalidRay, bad, "castRays");

  // Answer: the closest local hit by (t, id) of every ray that may cross
  // this region. The local BroadPhase's callback sees every box the ray
  // enters at or before the distance returned, ties included.
  const Region& mine = decomposition_.region(rank_);
  s.queries.clear();
  for (int r = 0; r < size_; ++r) {
    ByteReader rd(slice(all, offsets, r));
    uint32_t k = 0;
    while (!rd.done()) {
      const Vec3 origin = rd.getVec();
      const Vec3 direction = rd.getVec();
      const float length = rd.get<float>();
      const uint32_t q = k++;
      if (!segmentMayCross(makeRay(origin, direction, length), mine)) continue;
      GlobalHit best;
      local_->castRay(
          origin, direction, length,
          [&](uint32_t p, float t) -> float {
            if (!best.hit() || t < best.t || (t == best.t && ids_[p] < best.id))
              best = {ids_[p], t};
            return best.t;
          },
          filter);
      if (!best.hit()) continue;
      ByteWriter back(s.queries.to(r));
      back.put(q);
      back.put(best.t);
      back.put(best.id);
    }
  }
  s.queries.run(comm_, kTagQuery, 0, traffic);
  for (GlobalHit& h : out) h = {};
  for (int r = 0; r < size_; ++r) {
    ByteReader rd(s.queries.from(r));
    while (!rd.done()) {
      const uint32_t q = rd.get<uint32_t>();
      const float t = rd.get<float>();
      const uint64_t id = rd.get<uint64_t>();
      GlobalHit& h = out[q];
      if (!h.hit() || t < h.t || (t == h.t && id < h.id)) h = {id, t};
    }
  }
}

GlobalHit DistributedBroadPhase::castRay(const Vec3& origin, const Vec3& direction, float length,
                                         const Filter& filter) const {
  const RayInput ray{origin, direction, length};
  GlobalHit hit;
  castRays(std::span<const RayInput>(&ray, 1), std::span<GlobalHit>(&hit, 1), filter);
  return hit;
}

void DistributedBroadPhase::queryBoxes(std::span<const Aabb> boxes, BatchResults<uint64_t>& out,
                                       const Filter& filter) const {
  Scratch& s = *scratch_;
  Traffic traffic;
  std::string bad;
  for (size_t k = 0; k < boxes.size() && bad.empty(); ++k)
    if (!isValid(boxes[k]))
      bad = "queryBoxes: box " + std::to_string(k) + " on rank " + std::to_string(rank_) + ": " +
            describeInvalid(boxes[k]);
  s.bytes.clear();
  ByteWriter w(s.bytes);
  if (bad.empty())
    for (const Aabb& b : boxes) w.put(b);
  std::vector<std::byte> all;
  std::vector<uint64_t> offsets;
  const uint64_t flags = detail::allGather(
      comm_, s.bytes, bad.empty() ? 0 : faultBits(rank_, false), all, offsets, traffic);
  agreeOnErrors(flags, ErrorCode::invalidBox, bad, "queryBoxes");

  // Each proxy is reported by the rank whose region holds the lower corner
  // of its box's intersection with the query: that rank holds the proxy.
  const Region& mine = decomposition_.region(rank_);
  s.queries.clear();
  for (int r = 0; r < size_; ++r) {
    ByteReader rd(slice(all, offsets, r));
    uint32_t k = 0;
    while (!rd.done()) {
      const Aabb query = rd.getBox();
      const uint32_t q = k++;
      if (!mine.touches(query)) continue;
      ByteWriter back(s.queries.to(r));
      local_->queryBox(
          query,
          [&](uint32_t p) {
            if (mine.contains(boxes_[p].min.cwiseMax(query.min))) {
              back.put(q);
              back.put(ids_[p]);
            }
            return true;
          },
          filter);
    }
  }
  s.queries.run(comm_, kTagQuery, 0, traffic);
  std::vector<std::pair<uint32_t, uint64_t>> found;
  for (int r = 0; r < size_; ++r) {
    ByteReader rd(s.queries.from(r));
    while (!rd.done()) {
      const uint32_t q = rd.get<uint32_t>();
      found.emplace_back(q, rd.get<uint64_t>());
    }
  }
  std::sort(found.begin(), found.end());
  out.items.clear();
  out.offsets.assign(boxes.size() + 1, 0);
  for (const auto& [q, id] : found) {
    out.items.push_back(id);
    ++out.offsets[q + 1];
  }
  for (size_t q = 0; q < boxes.size(); ++q) out.offsets[q + 1] += out.offsets[q];
}

void DistributedBroadPhase::queryBox(const Aabb& box, std::vector<uint64_t>& out,
                                     const Filter& filter) const {
  BatchResults<uint64_t> results;
  queryBoxes(std::span<const Aabb>(&box, 1), results, filter);
  out.assign(results.items.begin(), results.items.end());
}

void DistributedBroadPhase::nearest(std::span<const NearestInput> queries,
                                    BatchResults<GlobalNeighbour>& out,
                                    const Filter& filter) const {
  Scratch& s = *scratch_;
  Traffic traffic;
  std::string bad;
  for (size_t k = 0; k < queries.size() && bad.empty(); ++k) {
    const NearestInput& q = queries[k];
    if (q.k == 0)
      bad = "nearest: query " + std::to_string(k) + " on rank " + std::to_string(rank_) +
            ": k must be >= 1";
    else if (!isFinite(q.point) || !isWithinLimit(q.point))
      bad = "nearest: query " + std::to_string(k) + " on rank " + std::to_string(rank_) +
            ": point is not finite or beyond 2^24";
  }
  s.bytes.clear();
  ByteWriter w(s.bytes);
  if (bad.empty()) {
    for (const NearestInput& q : queries) {
      w.put(q.point);
      w.put(q.k);
    }
  }
  std::vector<std::byte> all;
  std::vector<uint64_t> offsets;
  const uint64_t flags = detail::allGather(comm_, s.bytes, bad.empty() ? 0 : faultBits(rank_, true),
                                           all, offsets, traffic);
  agreeOnErrors(flags, ErrorCode::invalidArgument, bad, "nearest");

  // Every rank sends its k best by (distance, id). The local query ranks
  // ties by local index, so when its k-th distance D is shared, a box query
  // collects every local proxy within D: a proxy of the global k nearest is
  // then among its holder's k best by (distance, id).
  s.queries.clear();
  std::vector<Neighbour> local;
  std::vector<GlobalNeighbour> candidates;
  for (int r = 0; r < size_; ++r) {
    ByteReader rd(slice(all, offsets, r));
    uint32_t index = 0;
    while (!rd.done()) {
      const Vec3 point = rd.getVec();
      const uint32_t k = rd.get<uint32_t>();
      const uint32_t q = index++;
      if (local_->proxyCount() == 0) continue;
      local_->nearest(point, k, local, filter);
      candidates.clear();
      if (local.size() < k) {
        for (const Neighbour& n : local) candidates.push_back({ids_[n.proxy], n.distanceSquared});
      } else {
        const float limit = local.back().distanceSquared;
        // A cube that holds every box within sqrt(limit) of the point, a
        // little generous (the exact test below decides), clamped to the
        // valid coordinates.
        const float reach = std::sqrt(limit) * 1.001f;
        Aabb cube{point - Vec3(reach, reach, reach), point + Vec3(reach, reach, reach)};
        constexpr float kInfinity = std::numeric_limits<float>::infinity();
        for (int a = 0; a < 3; ++a) {
          cube.min[a] = std::max(
              std::nextafter(std::nextafter(cube.min[a], -kInfinity), -kInfinity), -kMaxCoordinate);
          cube.max[a] = std::min(std::nextafter(std::nextafter(cube.max[a], kInfinity), kInfinity),
                                 kMaxCoordinate);
        }
        local_->queryBox(
            cube,
            [&](uint32_t p) {
              const float d = distanceSquared(boxes_[p], point);
              if (d <= limit) candidates.push_back({ids_[p], d});
              return true;
            },
            filter);
      }
      std::sort(candidates.begin(), candidates.end(), [](const auto& x, const auto& y) {
        return x.distanceSquared < y.distanceSquared ||
               (x.distanceSquared == y.distanceSquared && x.id < y.id);
      });
      if (candidates.size() > k) candidates.resize(k);
      ByteWriter back(s.queries.to(r));
      for (const GlobalNeighbour& c : candidates) {
        back.put(q);
        back.put(c.id);
        back.put(c.distanceSquared);
      }
    }
  }
  s.queries.run(comm_, kTagQuery, 0, traffic);
  struct Found {
    uint32_t q;
    GlobalNeighbour n;
  };
  std::vector<Found> found;
  for (int r = 0; r < size_; ++r) {
    ByteReader rd(s.queries.from(r));
    while (!rd.done()) {
      const uint32_t q = rd.get<uint32_t>();
      const uint64_t id = rd.get<uint64_t>();
      found.push_back({q, {id, rd.get<float>()}});
    }
  }
  std::sort(found.begin(), found.end(), [](const Found& x, const Found& y) {
    if (x.q != y.q) return x.q < y.q;
    if (x.n.distanceSquared != y.n.distanceSquared)
      return x.n.distanceSquared < y.n.distanceSquared;
    return x.n.id < y.n.id;
  });
  out.items.clear();
  out.offsets.assign(queries.size() + 1, 0);
  for (size_t k = 0; k < found.size(); ++k) {
    const Found& f = found[k];
    // A ghost and its owner's copy answer alike: keep one.
    if (k > 0 && found[k - 1].q == f.q && found[k - 1].n.id == f.n.id) continue;
    if (out.offsets[f.q + 1] == queries[f.q].k) continue;
    out.items.push_back(f.n);
    ++out.offsets[f.q + 1];
  }
  for (size_t q = 0; q < queries.size(); ++q) out.offsets[q + 1] += out.offsets[q];
}

void DistributedBroadPhase::nearest(const Vec3& point, uint32_t k,
                                    std::vector<GlobalNeighbour>& out, const Filter& filter) const {
  const NearestInput query{point, k};
  BatchResults<GlobalNeighbour> results;
  nearest(std::span<const NearestInput>(&query, 1), results, filter);
  out.assign(results.items.begin(), results.items.end());
}

}  // namespace bp::mpi
