#include "test_support.h"

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

}  // namespace bp::test
