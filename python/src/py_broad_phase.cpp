#include "py_broad_phase.h"

#include <broadphase/error.h>
#include <broadphase/math/aabb.h>
#include <broadphase/math/ray.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <limits>
#include <mutex>
#include <vector>

namespace bp::python {

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::string handleText(ProxyId id) {
  char text[64];
  std::snprintf(text, sizeof text, "handle 0x%016llx", (unsigned long long)handleBits(id));
  return text;
}

Structure parseStructure(const std::string& name) {
  if (name == "automatic") return Structure::automatic;
  if (name == "bvh") return Structure::bvh;
  if (name == "sweep") return Structure::sweep;
  reject(ErrorCode::invalidArgument,
         "BroadPhase: structure must be 'automatic', 'bvh' or 'sweep', not '" + name + "'");
}

RayTreeMode parseRayTree(const std::string& name) {
  if (name == "automatic") return RayTreeMode::automatic;
  if (name == "always") return RayTreeMode::always;
  if (name == "never") return RayTreeMode::never;
  reject(ErrorCode::invalidArgument,
         "BroadPhase: ray_tree must be 'automatic', 'always' or 'never', not '" + name + "'");
}

MotionType parseMotion(const std::string& name, const char* what) {
  if (name == "dynamic") return MotionType::dynamic;
  if (name == "static") return MotionType::staticBody;
  if (name == "kinematic") return MotionType::kinematic;
  reject(ErrorCode::invalidArgument, std::string(what) +
                                         ": motion must be 'dynamic', 'static' or 'kinematic', "
                                         "not '" +
                                         name + "'");
}

RayQuery parseRayQuery(const std::string& name) {
  if (name == "closest") return RayQuery::closest;
  if (name == "any") return RayQuery::any;
  reject(ErrorCode::invalidArgument,
         "cast_rays: query must be 'closest' or 'any' (cast_rays_all gives every hit), not '" +
             name + "'");
}

BroadPhaseConfig makeConfig(const std::string& structure, int threads, float margin, float cellSize,
                            bool pairKinematicKinematic, uint64_t maxPairs, py::handle layers) {
  BroadPhaseConfig config;
  config.structure = parseStructure(structure);
  config.threads = threads;
  config.margin = margin;
  config.cellSize = cellSize;
  config.pairKinematicKinematic = pairKinematicKinematic;
  config.maxPairs = maxPairs;
  if (!layers.is_none()) config.layers = layerTableOf(layers, "BroadPhase: layers");
  return config;
}

BroadPhaseConfig withRayTree(BroadPhaseConfig config, const std::string& rayTree) {
  config.rayTree = parseRayTree(rayTree);
  return config;
}

Aabb boxAt(const Vec3Rows& lo, const Vec3Rows& hi, size_t i) { return {lo.row(i), hi.row(i)}; }

// The rays of a batch, validated as the library validates them (so that the
// message names the caller's ray, not a normalised one) and built by makeRay,
// in parallel chunks; a bad batch is searched again in order for its first
// bad ray.
void buildRays(Scheduler& scheduler, const Vec3Rows& origins, const Vec3Rows& directions,
               const FloatColumn& lengths, const char* what, std::vector<Ray>& rays) {
  const uint32_t n = uint32_t(origins.rows);
  rays.resize(n);
  std::atomic<bool> bad{false};
  scheduler.forEach(0, n, 4096, [&](uint32_t begin, uint32_t end) {
    for (uint32_t r = begin; r < end; ++r) {
      const Vec3 o = origins.row(r), d = directions.row(r);
      if (!describeInvalidRay(o, d, lengths.at(r)).empty()) {
        bad.store(true, std::memory_order_relaxed);
        return;
      }
      rays[r] = makeRay(o, d, lengths.at(r));
    }
  });
  if (!bad.load(std::memory_order_relaxed)) return;
  for (uint32_t r = 0; r < n; ++r)
    if (std::string why = describeInvalidRay(origins.row(r), directions.row(r), lengths.at(r));
        !why.empty())
      reject(ErrorCode::invalidRay, std::string(what) + ": ray " + std::to_string(r) + ": " + why);
}

bool validPoint(const Vec3& p) { return isFinite(p) && isWithinLimit(p); }

}  // namespace

PyBroadPhase::PyBroadPhase(const std::string& structure, int threads, float margin, float cellSize,
                           bool pairKinematicKinematic, uint64_t maxPairs, py::handle layers,
                           const std::string& rayTree)
    : config_(withRayTree(makeConfig(structure, threads, margin, cellSize, pairKinematicKinematic,
                                     maxPairs, layers),
                          rayTree)),
      world_(config_) {}

void PyBroadPhase::prepareRays() {
  py::gil_scoped_release release;
  std::shared_lock lock(mutex_);
  world_.prepareRays();
}

std::string PyBroadPhase::rayTree() const {
  return config_.rayTree == RayTreeMode::always  ? "always"
         : config_.rayTree == RayTreeMode::never ? "never"
                                                 : "automatic";
}

void PyBroadPhase::checkLive(std::span<const ProxyId> ids, const char* what) const {
  for (size_t k = 0; k < ids.size(); ++k)
    if (!world_.contains(ids[k]))
      reject(ErrorCode::staleHandle,
             std::string(what) + ": entry " + std::to_string(k) + ": " + handleText(ids[k]) +
                 " is not a live proxy of this broadphase (removed, never issued, or foreign)");
}

py::array_t<uint64_t> PyBroadPhase::add(py::handle lo, py::handle hi, const std::string& motion,
                                        py::handle userData, py::handle category, py::handle mask,
                                        py::handle layer) {
  const Vec3Rows l = vec3Rows(lo, "add: lo");
  const Vec3Rows h = vec3Rows(hi, "add: hi", long(l.rows));
  const size_t n = l.rows;
  const MotionType m = parseMotion(motion, "add");
  const bool userIsHandle = userData.is_none();
  const U64Column user = userIsHandle ? U64Column{} : u64Column(userData, "add: user_data", n);
  const U64Column cat = u64Column(category, "add: category", n);
  const U64Column msk = u64Column(mask, "add: mask", n);
  const U64Column lay = layerColumn(layer, "add: layer", n);
  py::array_t<uint64_t> out(static_cast<py::ssize_t>(n));
  const std::span<ProxyId> ids(reinterpret_cast<ProxyId*>(out.mutable_data()), n);
  {
    py::gil_scoped_release release;
    std::unique_lock lock(mutex_);
    std::vector<ProxyDesc> descs(n);
    for (size_t k = 0; k < n; ++k)
      descs[k] = {boxAt(l, h, k), m, Filter{cat.at(k), msk.at(k)}, user.at(k), uint32_t(lay.at(k))};
    world_.add(descs, ids);  // validates every entry before adding any
    if (userIsHandle)
      for (ProxyId id : ids) world_.setUserData(id, handleBits(id));
  }
  return out;
}

void PyBroadPhase::move(py::handle ids, py::handle lo, py::handle hi) {
  const HandleArray handles = handleArray(ids, "move: ids");
  const Vec3Rows l = vec3Rows(lo, "move: lo", long(handles.ids.size()));
  const Vec3Rows h = vec3Rows(hi, "move: hi", long(handles.ids.size()));
  py::gil_scoped_release release;
  std::unique_lock lock(mutex_);
  // The library takes boxes as min/max pairs: lo and hi are gathered into
  // one scratch array (kept, so that a steady frame does not allocate).
  moveBoxes_.resize(l.rows);
  for (size_t k = 0; k < l.rows; ++k) moveBoxes_[k] = boxAt(l, h, k);
  world_.move(handles.ids, moveBoxes_);  // validates every entry before moving any
}

void PyBroadPhase::remove(py::handle ids) {
  const HandleArray handles = handleArray(ids, "remove: ids");
  py::gil_scoped_release release;
  std::unique_lock lock(mutex_);
  checkLive(handles.ids, "remove");
  world_.remove(handles.ids);  // rejects a repeat, naming its entry, before removing any
}

void PyBroadPhase::setFilter(py::handle ids, py::handle category, py::handle mask) {
  const HandleArray handles = handleArray(ids, "set_filter: ids");
  const U64Column cat = u64Column(category, "set_filter: category", handles.ids.size());
  const U64Column msk = u64Column(mask, "set_filter: mask", handles.ids.size());
  py::gil_scoped_release release;
  std::unique_lock lock(mutex_);
  checkLive(handles.ids, "set_filter");
  for (size_t k = 0; k < handles.ids.size(); ++k)
    world_.setFilter(handles.ids[k], Filter{cat.at(k), msk.at(k)});
}

void PyBroadPhase::setMotionType(py::handle ids, const std::string& motion) {
  const HandleArray handles = handleArray(ids, "set_motion_type: ids");
  const MotionType m = parseMotion(motion, "set_motion_type");
  py::gil_scoped_release release;
  std::unique_lock lock(mutex_);
  checkLive(handles.ids, "set_motion_type");
  for (ProxyId id : handles.ids) world_.setMotionType(id, m);
}

void PyBroadPhase::setUserData(py::handle ids, py::handle userData) {
  const HandleArray handles = handleArray(ids, "set_user_data: ids");
  const U64Column user = u64Column(userData, "set_user_data: user_data", handles.ids.size());
  py::gil_scoped_release release;
  std::unique_lock lock(mutex_);
  checkLive(handles.ids, "set_user_data");
  for (size_t k = 0; k < handles.ids.size(); ++k) world_.setUserData(handles.ids[k], user.at(k));
}

py::array_t<bool> PyBroadPhase::contains(py::handle ids) {
  const HandleArray handles = handleArray(ids, "contains: ids");
  py::array_t<bool> out(static_cast<py::ssize_t>(handles.ids.size()));
  bool* live = out.mutable_data();
  py::gil_scoped_release release;
  std::shared_lock lock(mutex_);
  for (size_t k = 0; k < handles.ids.size(); ++k) live[k] = world_.contains(handles.ids[k]);
  return out;
}

py::array_t<uint64_t> PyBroadPhase::userData(py::handle ids) {
  const HandleArray handles = handleArray(ids, "user_data: ids");
  py::array_t<uint64_t> out(static_cast<py::ssize_t>(handles.ids.size()));
  uint64_t* user = out.mutable_data();
  py::gil_scoped_release release;
  std::shared_lock lock(mutex_);
  checkLive(handles.ids, "user_data");
  for (size_t k = 0; k < handles.ids.size(); ++k) user[k] = world_.userData(handles.ids[k].index);
  return out;
}

py::tuple PyBroadPhase::update() {
  std::vector<uint64_t> lists[3];
  {
    py::gil_scoped_release release;
    std::unique_lock lock(mutex_);
    const FramePairs& frame = world_.update();
    const std::span<const ProxyPair> spans[3] = {frame.pairs, frame.begun, frame.ended};
    for (int s = 0; s < 3; ++s) {
      lists[s].resize(2 * spans[s].size());
      uint64_t* out = lists[s].data();
      for (const ProxyPair& p : spans[s]) {
        *out++ = p.userDataA;
        *out++ = p.userDataB;
      }
    }
  }
  const auto rows = [](const std::vector<uint64_t>& v) { return py::ssize_t(v.size() / 2); };
  const py::ssize_t m0 = rows(lists[0]), m1 = rows(lists[1]), m2 = rows(lists[2]);
  return py::make_tuple(toArray(std::move(lists[0]), {m0, 2}),
                        toArray(std::move(lists[1]), {m1, 2}),
                        toArray(std::move(lists[2]), {m2, 2}));
}

py::tuple PyBroadPhase::castRays(py::handle origins, py::handle directions, py::handle lengths,
                                 const std::string& query, QueryFilter filter) {
  const Vec3Rows o = vec3Rows(origins, "cast_rays: origins");
  const Vec3Rows d = vec3Rows(directions, "cast_rays: directions", long(o.rows));
  const FloatColumn len = floatColumn(lengths, "cast_rays: lengths", o.rows);
  const RayQuery kind = parseRayQuery(query);
  const py::ssize_t n = py::ssize_t(o.rows);
  py::array_t<bool> hitOut(n);
  py::array_t<uint64_t> userOut(n);
  py::array_t<float> tOut(n);
  bool* hit = hitOut.mutable_data();
  uint64_t* user = userOut.mutable_data();
  float* t = tOut.mutable_data();
  {
    py::gil_scoped_release release;
    // Per Python thread, reused: a steady loop of equal batches does not allocate.
    // (Named through references: a lambda that names a thread_local directly
    // reads the worker's own, not this thread's.)
    thread_local std::vector<Ray> threadRays;
    thread_local std::vector<RayHit> threadHits;
    std::vector<Ray>& rays = threadRays;
    std::vector<RayHit>& hits = threadHits;
    buildRays(world_.scheduler(), o, d, len, "cast_rays", rays);
    hits.resize(rays.size());
    std::shared_lock lock(mutex_);
    world_.castRays(rays, hits, kind, filter.filter());
    world_.scheduler().forEach(0, uint32_t(hits.size()), 4096, [&](uint32_t begin, uint32_t end) {
      for (uint32_t r = begin; r < end; ++r) {
        hit[r] = hits[r].hit();
        user[r] = hit[r] ? world_.userData(hits[r].proxy) : kNone;
        t[r] = hit[r] ? hits[r].t : kInf;
      }
    });
  }
  return py::make_tuple(hitOut, userOut, tOut);
}

template <class Query>
py::tuple PyBroadPhase::groupedQuery(size_t count, Query&& query) {
  // Each query fills its own list (so any split over the workers gives the
  // same lists); the lists are then laid end to end.
  std::vector<int64_t> offsets(count + 1, 0);
  std::vector<uint64_t> user;
  std::vector<float> t;
  {
    py::gil_scoped_release release;
    std::shared_lock lock(mutex_);
    std::vector<std::vector<RayHit>> found(count);
    world_.scheduler().forEach(0, uint32_t(count), 64, [&](uint32_t begin, uint32_t end) {
      for (uint32_t q = begin; q < end; ++q) query(q, found[q]);
    });
    for (size_t q = 0; q < count; ++q) offsets[q + 1] = offsets[q] + int64_t(found[q].size());
    user.resize(size_t(offsets[count]));
    t.resize(size_t(offsets[count]));
    size_t at = 0;
    for (const std::vector<RayHit>& list : found)
      for (const RayHit& h : list) {
        user[at] = world_.userData(h.proxy);
        t[at++] = h.t;
      }
  }
  const py::ssize_t total = py::ssize_t(user.size());
  return py::make_tuple(toArray(std::move(offsets), {py::ssize_t(count) + 1}),
                        toArray(std::move(user), {total}), toArray(std::move(t), {total}));
}

py::tuple PyBroadPhase::castRaysAll(py::handle origins, py::handle directions, py::handle lengths,
                                    QueryFilter filter) {
  const Vec3Rows o = vec3Rows(origins, "cast_rays_all: origins");
  const Vec3Rows d = vec3Rows(directions, "cast_rays_all: directions", long(o.rows));
  const FloatColumn len = floatColumn(lengths, "cast_rays_all: lengths", o.rows);
  std::vector<Ray> rays;
  {
    py::gil_scoped_release release;
    buildRays(world_.scheduler(), o, d, len, "cast_rays_all", rays);
  }
  const size_t count = rays.size();
  std::vector<int64_t> offsets(count + 1, 0);
  std::vector<uint64_t> user;
  std::vector<float> t;
  {
    py::gil_scoped_release release;
    std::vector<RayHit> hits;
    std::vector<size_t> ends;
    {
      std::shared_lock lock(mutex_);
      // Sorted nearest first, ties to the lower index, ray by ray.
      world_.castRaysAll(rays, hits, ends, filter.filter());
      user.resize(hits.size());
      for (size_t k = 0; k < hits.size(); ++k) user[k] = world_.userData(hits[k].proxy);
    }
    std::copy(ends.begin(), ends.end(), offsets.begin());
    t.resize(hits.size());
    for (size_t k = 0; k < hits.size(); ++k) t[k] = hits[k].t;
  }
  const py::ssize_t total = py::ssize_t(user.size());
  return py::make_tuple(toArray(std::move(offsets), {py::ssize_t(count) + 1}),
                        toArray(std::move(user), {total}), toArray(std::move(t), {total}));
}

py::array_t<uint64_t> PyBroadPhase::queryBox(py::handle lo, py::handle hi, QueryFilter filter) {
  const Aabb box{vec3(lo, "query_box: lo"), vec3(hi, "query_box: hi")};
  std::vector<uint32_t> found;
  std::vector<uint64_t> user;
  {
    py::gil_scoped_release release;
    std::shared_lock lock(mutex_);
    world_.queryBox(
        box, [&](uint32_t proxy) { return found.push_back(proxy), true; }, filter.filter());
    std::sort(found.begin(), found.end());
    user.resize(found.size());
    for (size_t k = 0; k < found.size(); ++k) user[k] = world_.userData(found[k]);
  }
  const py::ssize_t n = py::ssize_t(user.size());
  return toArray(std::move(user), {n});
}

py::tuple PyBroadPhase::queryBoxes(py::handle lo, py::handle hi, QueryFilter filter) {
  const Vec3Rows l = vec3Rows(lo, "query_boxes: lo");
  const Vec3Rows h = vec3Rows(hi, "query_boxes: hi", long(l.rows));
  for (size_t q = 0; q < l.rows; ++q)
    if (const Aabb box = boxAt(l, h, q); !isValid(box))
      reject(ErrorCode::invalidBox,
             "query_boxes: box " + std::to_string(q) + ": " + describeInvalid(box));
  const Filter f = filter.filter();
  py::tuple grouped = groupedQuery(l.rows, [&](uint32_t q, std::vector<RayHit>& out) {
    world_.queryBox(
        boxAt(l, h, q),
        [&](uint32_t proxy) {
          return out.push_back({proxy, 0.0f}), true;
        },
        f);
    std::sort(out.begin(), out.end(),
              [](const RayHit& a, const RayHit& b) { return a.proxy < b.proxy; });
  });
  return py::make_tuple(grouped[0], grouped[1]);
}

py::array_t<uint64_t> PyBroadPhase::queryPoint(py::handle point, QueryFilter filter) {
  const Vec3 p = vec3(point, "query_point: point");
  std::vector<uint32_t> found;
  std::vector<uint64_t> user;
  {
    py::gil_scoped_release release;
    std::shared_lock lock(mutex_);
    world_.queryPoint(
        p, [&](uint32_t proxy) { return found.push_back(proxy), true; }, filter.filter());
    std::sort(found.begin(), found.end());
    user.resize(found.size());
    for (size_t k = 0; k < found.size(); ++k) user[k] = world_.userData(found[k]);
  }
  const py::ssize_t n = py::ssize_t(user.size());
  return toArray(std::move(user), {n});
}

py::tuple PyBroadPhase::queryPoints(py::handle points, QueryFilter filter) {
  const Vec3Rows p = vec3Rows(points, "query_points: points");
  for (size_t q = 0; q < p.rows; ++q)
    if (!validPoint(p.row(q)))
      reject(ErrorCode::invalidArgument,
             "query_points: point " + std::to_string(q) + " is not finite or beyond 2^24");
  const Filter f = filter.filter();
  py::tuple grouped = groupedQuery(p.rows, [&](uint32_t q, std::vector<RayHit>& out) {
    world_.queryPoint(
        p.row(q),
        [&](uint32_t proxy) {
          return out.push_back({proxy, 0.0f}), true;
        },
        f);
    std::sort(out.begin(), out.end(),
              [](const RayHit& a, const RayHit& b) { return a.proxy < b.proxy; });
  });
  return py::make_tuple(grouped[0], grouped[1]);
}

py::tuple PyBroadPhase::nearest(py::handle points, long k, QueryFilter filter) {
  const Vec3Rows p = vec3Rows(points, "nearest: points");
  if (k < 1 || uint64_t(k) > UINT32_MAX)
    reject(ErrorCode::invalidArgument, "nearest: k must be in [1, 2^32), not " + std::to_string(k));
  for (size_t q = 0; q < p.rows; ++q)
    if (!validPoint(p.row(q)))
      reject(ErrorCode::invalidArgument,
             "nearest: point " + std::to_string(q) + " is not finite or beyond 2^24");
  const size_t width = size_t(k);
  py::array_t<uint64_t> userOut({py::ssize_t(p.rows), py::ssize_t(k)});
  py::array_t<float> d2Out({py::ssize_t(p.rows), py::ssize_t(k)});
  uint64_t* user = userOut.mutable_data();
  float* d2 = d2Out.mutable_data();
  {
    py::gil_scoped_release release;
    std::shared_lock lock(mutex_);
    // The library's batch: in parallel, and counted toward the rays' tree as
    // one batch (a large one walks the tree from its first point).
    std::vector<Vec3> at(p.rows);
    for (size_t q = 0; q < p.rows; ++q) at[q] = p.row(q);
    std::vector<Neighbour> found;
    std::vector<size_t> offsets;
    world_.nearest(at, uint32_t(k), found, offsets, filter.filter());
    world_.scheduler().forEach(0, uint32_t(p.rows), 1024, [&](uint32_t begin, uint32_t end) {
      for (uint32_t q = begin; q < end; ++q) {
        uint64_t* u = user + size_t(q) * width;
        float* d = d2 + size_t(q) * width;
        const size_t first = offsets[q], count = offsets[q + 1] - first;
        for (size_t j = 0; j < width; ++j) {
          const bool have = j < count;
          u[j] = have ? world_.userData(found[first + j].proxy) : kNone;
          d[j] = have ? found[first + j].distanceSquared : kInf;
        }
      }
    });
  }
  return py::make_tuple(userOut, d2Out);
}

void PyBroadPhase::shiftOrigin(py::handle offset) {
  const Vec3 v = vec3(offset, "shift_origin: offset");
  py::gil_scoped_release release;
  std::unique_lock lock(mutex_);
  world_.shiftOrigin(v);
}

uint32_t PyBroadPhase::proxyCount() {
  std::shared_lock lock(mutex_);
  return world_.proxyCount();
}

std::string PyBroadPhase::validate() {
  py::gil_scoped_release release;
  std::shared_lock lock(mutex_);
  return world_.validate();
}

size_t PyBroadPhase::memoryBytes() {
  std::shared_lock lock(mutex_);
  return world_.memoryBytes();
}

py::dict PyBroadPhase::memoryUse() {
  MemoryUse m;
  {
    std::shared_lock lock(mutex_);
    m = world_.memoryUse();
  }
  py::dict d;
  d["structure"] = m.structure;
  d["ray_tree"] = m.rayTree;
  d["proxies"] = m.proxies;
  d["changes"] = m.changes;
  d["pairs"] = m.pairs;
  d["events"] = m.events;
  d["doubles"] = m.doubles;
  d["query_view"] = m.queryView;
  return d;
}

std::string PyBroadPhase::structure() const {
  switch (world_.structure()) {
    case Structure::bvh: return "bvh";
    case Structure::sweep: return "sweep";
    case Structure::automatic: return "automatic";
  }
  return "unknown";
}

}  // namespace bp::python
