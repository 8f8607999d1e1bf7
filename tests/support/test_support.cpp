#include "test_support.h"

#include <broadphase/testkit/brute_force.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>

namespace bp::test {

namespace {
std::vector<std::vector<std::string>> readCsv(const std::string& name) {
  std::ifstream in(std::string(BP_TEST_DATA_DIR) + "/" + name);
  if (!in) {
    // Fatal in every build (one built without exceptions cannot throw).
    std::fprintf(stderr, "cannot open test data %s\n", name.c_str());
    std::abort();
  }
  std::vector<std::vector<std::string>> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> fields;
    std::stringstream s(line);
    std::string f;
    while (std::getline(s, f, ',')) fields.push_back(f);
    if (!line.empty() && line.back() == ',') fields.emplace_back();
    rows.push_back(fields);
  }
  return rows;
}
}  // namespace

std::vector<ReferencePairs> loadReferencePairs() {
  std::vector<ReferencePairs> out;
  for (const auto& r : readCsv("pairs_n10000.csv"))
    out.push_back({r.at(0), uint32_t(std::stoul(r.at(1))), std::stoi(r.at(2)), std::stoull(r.at(3)),
                   std::stoull(r.at(4), nullptr, 16)});
  return out;
}

std::vector<ReferenceHit> loadReferenceRays() {
  std::vector<ReferenceHit> out;
  for (const auto& r : readCsv("rays_uniform_n10000.csv"))
    out.push_back({uint32_t(std::stoul(r.at(0))), std::stoll(r.at(1)),
                   r.size() > 2 && !r[2].empty() ? std::stod(r[2]) : -1.0});
  return out;
}

void ProxyMirror::set(ProxyId id, const Aabb& box, bool stat) {
  if (id.index >= boxes.size()) {
    boxes.resize(id.index + 1);
    live.resize(id.index + 1, 0);
    isStatic.resize(id.index + 1, 0);
    handles.resize(id.index + 1);
  }
  boxes[id.index] = box;
  live[id.index] = 1;
  isStatic[id.index] = stat;
  handles[id.index] = id;
}

std::vector<uint32_t> ProxyMirror::liveIndices() const {
  std::vector<uint32_t> v;
  for (uint32_t i = 0; i < live.size(); ++i)
    if (live[i]) v.push_back(i);
  return v;
}

::testing::AssertionResult samePairs(const std::vector<Pair>& expected,
                                     const std::vector<Pair>& actual) {
  if (expected == actual) return ::testing::AssertionSuccess();
  std::vector<Pair> missing, extra;
  std::set_difference(expected.begin(), expected.end(), actual.begin(), actual.end(),
                      std::back_inserter(missing));
  std::set_difference(actual.begin(), actual.end(), expected.begin(), expected.end(),
                      std::back_inserter(extra));
  auto r = ::testing::AssertionFailure();
  r << "expected " << expected.size() << " pairs, got " << actual.size() << "; " << missing.size()
    << " missing, " << extra.size() << " extra";
  for (size_t i = 0; i < std::min<size_t>(missing.size(), 5); ++i)
    r << "\n  missing (" << missing[i].a << ", " << missing[i].b << ")";
  for (size_t i = 0; i < std::min<size_t>(extra.size(), 5); ++i)
    r << "\n  extra (" << extra[i].a << ", " << extra[i].b << ")";
  if (missing.empty() && extra.empty()) r << " (same set, wrong order or duplicates)";
  return r;
}

std::vector<Pair> indicesOf(std::span<const ProxyPair> pairs) {
  std::vector<Pair> out;
  out.reserve(pairs.size());
  for (const ProxyPair& p : pairs) out.push_back({p.a, p.b});
  return out;
}

std::vector<Pair> pairsMissingFrom(const std::vector<Pair>& a, const std::vector<Pair>& b) {
  std::vector<Pair> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

ProxyId FacadeMirror::add(BroadPhase& bp, const ProxyDesc& desc) {
  const ProxyId id = bp.add(desc);
  if (id.index >= descs.size()) {
    descs.resize(id.index + 1);
    live.resize(id.index + 1, 0);
    handles.resize(id.index + 1);
  }
  descs[id.index] = desc;
  live[id.index] = 1;
  handles[id.index] = id;
  return id;
}

void FacadeMirror::remove(BroadPhase& bp, uint32_t index) {
  bp.remove(handles.at(index));
  live[index] = 0;
}

void FacadeMirror::move(BroadPhase& bp, uint32_t index, const Aabb& box) {
  bp.move(handles.at(index), box);
  descs[index].box = box;
}

std::vector<uint32_t> FacadeMirror::liveIndices() const {
  std::vector<uint32_t> v;
  for (uint32_t i = 0; i < live.size(); ++i)
    if (live[i]) v.push_back(i);
  return v;
}

std::vector<Pair> FacadeMirror::expectedPairs(bool kinematicPairs) const {
  auto is = [](const ProxyDesc& d, MotionType m) { return d.motion == m; };
  std::vector<Pair> out;
  const std::vector<uint32_t> ids = liveIndices();
  for (size_t i = 0; i < ids.size(); ++i)
    for (size_t j = i + 1; j < ids.size(); ++j) {
      const ProxyDesc& a = descs[ids[i]];
      const ProxyDesc& b = descs[ids[j]];
      const bool aStatic = is(a, MotionType::staticBody), bStatic = is(b, MotionType::staticBody);
      const bool aKin = is(a, MotionType::kinematic), bKin = is(b, MotionType::kinematic);
      if ((aStatic && bStatic) || (aKin && bStatic) || (aStatic && bKin)) continue;
      if (aKin && bKin && !kinematicPairs) continue;
      if (!a.filter.accepts(b.filter) || !overlaps(a.box, b.box)) continue;
      out.push_back({ids[i], ids[j]});
    }
  return out;  // ids ascend, so the pairs are sorted
}

std::vector<Pair> FacadeMirror::structurePairs() const {
  std::vector<Aabb> boxes(descs.size());
  std::vector<uint8_t> isStatic(descs.size(), 0);
  for (size_t i = 0; i < descs.size(); ++i) {
    boxes[i] = descs[i].box;
    isStatic[i] = descs[i].motion == MotionType::staticBody;
  }
  return brute::findPairs(boxes, isStatic, live);
}

}  // namespace bp::test
