// allLiveAndValid (broadphase/src/common/batch_check.h), the check every batch move
// makes before it changes anything: each kind of bad entry, at every place
// in a batch (the vector path takes eight entries at a time, the rest one by
// one), against the scalar definitions isLive() and isValid(). And
// indicesAscending, which tells whether a batch may be written in parallel.
#include <broadphase/math/aabb.h>
#include <broadphase/proxy_id.h>

#include "common/batch_check.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace bp {
namespace {

struct Batch {
  HandlePool pool;
  std::vector<ProxyId> ids;
  std::vector<Aabb> boxes;
  ProxyId released;
};

// 37 good entries (four blocks of eight and a tail), naming live proxies of a
// pool that also holds released slots.
Batch goodBatch() {
  Batch b;
  for (uint32_t k = 0; k < 48; ++k) b.ids.push_back(b.pool.allocate());
  b.released = b.ids[40];
  for (uint32_t k = 40; k < 48; ++k) b.pool.release(b.ids[k]);
  b.ids.resize(37);
  for (uint32_t k = 0; k < 37; ++k) {
    const float v = float(k) - 18.0f;
    // Touching extents (min == max on y) are valid.
    b.boxes.push_back({Vec3(v, v, -v), Vec3(v + 1.5f, v, -v + 0.25f)});
  }
  return b;
}

bool scalarCheck(const Batch& b, size_t begin, size_t end) {
  for (size_t k = begin; k < end; ++k)
    if (!b.pool.isLive(b.ids[k]) || !isValid(b.boxes[k])) return false;
  return true;
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Coordinate c of a box: min x, y, z, then max x, y, z.
float& coord(Aabb& box, int c) { return c < 3 ? box.min[c] : box.max[c - 3]; }

// One way of spoiling entry k.
using Spoil = void (*)(Batch&, size_t k, int variant);

TEST(AllLiveAndValid, GoodBatchPassesEveryRange) {
  const Batch b = goodBatch();
  for (size_t begin = 0; begin <= b.ids.size(); ++begin)
    for (size_t end = begin; end <= b.ids.size(); ++end)
      ASSERT_TRUE(allLiveAndValid(b.pool, b.ids, b.boxes, begin, end)) << begin << " " << end;
}

TEST(AllLiveAndValid, EachBadEntryIsFoundAtEveryPlace) {
  struct Case {
    const char* what;
    int variants;
    Spoil spoil;
  };
  const Case cases[] = {
      {"NaN", 6, [](Batch& b, size_t k, int c) { coord(b.boxes[k], c) = kNaN; }},
      {"+inf", 6, [](Batch& b, size_t k, int c) { coord(b.boxes[k], c) = kInf; }},
      {"-inf", 6, [](Batch& b, size_t k, int c) { coord(b.boxes[k], c) = -kInf; }},
      {"too far", 6,
       [](Batch& b, size_t k, int c) { coord(b.boxes[k], c) = 2.0f * kMaxCoordinate; }},
      {"inverted", 3,
       [](Batch& b, size_t k, int a) { b.boxes[k].max[a] = b.boxes[k].min[a] - 0.5f; }},
      {"released", 1, [](Batch& b, size_t k, int) { b.ids[k] = b.released; }},
      {"old generation", 1, [](Batch& b, size_t k, int) { --b.ids[k].generation; }},
      {"index past capacity", 1, [](Batch& b, size_t k, int) { b.ids[k].index = 48; }},
      {"index with the top bit", 1,
       [](Batch& b, size_t k, int) { b.ids[k].index = 0x80000000u + b.ids[k].index; }},
      {"null handle", 1, [](Batch& b, size_t k, int) { b.ids[k] = ProxyId{}; }},
      // A free slot named with its current generation: only the live flag
      // tells it apart.
      {"free slot", 1, [](Batch& b, size_t k, int) { b.ids[k] = b.pool.handleOf(41); }},
  };
  for (const Case& c : cases)
    for (int variant = 0; variant < c.variants; ++variant)
      for (size_t k = 0; k < 37; ++k) {
        Batch b = goodBatch();
        c.spoil(b, k, variant);
        ASSERT_FALSE(scalarCheck(b, k, k + 1)) << c.what;  // the case really is bad
        EXPECT_FALSE(allLiveAndValid(b.pool, b.ids, b.boxes, 0, b.ids.size()))
            << c.what << " " << variant << " at " << k;
        // Ranges that hold it fail; ranges beside it pass.
        EXPECT_FALSE(allLiveAndValid(b.pool, b.ids, b.boxes, k, b.ids.size())) << c.what;
        EXPECT_FALSE(allLiveAndValid(b.pool, b.ids, b.boxes, 0, k + 1)) << c.what;
        EXPECT_TRUE(allLiveAndValid(b.pool, b.ids, b.boxes, 0, k)) << c.what;
        EXPECT_TRUE(allLiveAndValid(b.pool, b.ids, b.boxes, k + 1, b.ids.size())) << c.what;
      }
}

TEST(AllLiveAndValid, EmptyPoolRejectsEveryHandle) {
  HandlePool pool;
  const std::vector<ProxyId> ids(9, ProxyId{0, 0});
  const std::vector<Aabb> boxes(9, Aabb{Vec3(0, 0, 0), Vec3(1, 1, 1)});
  EXPECT_FALSE(allLiveAndValid(pool, ids, boxes, 0, 9));
  EXPECT_TRUE(allLiveAndValid(pool, ids, boxes, 3, 3));
}

// indicesAscending against its definition, for every range of a batch with
// one place out of order (equal, smaller, or an index with its top bit set,
// which a signed compare would order wrongly), at every place.
TEST(IndicesAscending, MatchesTheDefinitionOnEveryRange) {
  auto reference = [](const std::vector<ProxyId>& ids, size_t begin, size_t end) {
    for (size_t k = std::max<size_t>(begin, 1); k < end; ++k)
      if (!(ids[k - 1].index < ids[k].index)) return false;
    return true;
  };
  std::vector<ProxyId> sorted;
  for (uint32_t k = 0; k < 29; ++k) sorted.push_back(ProxyId{10 + 3 * k, k % 4});
  EXPECT_TRUE(indicesAscending(sorted, 0, sorted.size()));
  size_t checked = 0, rejected = 0;
  for (size_t at = 0; at < sorted.size(); ++at)
    for (const uint32_t bad : {0u, 1u, 2u}) {
      std::vector<ProxyId> ids = sorted;
      if (bad == 0) ids[at].index = at > 0 ? ids[at - 1].index : ids[at + 1].index;
      if (bad == 1) ids[at].index = at > 0 ? ids[at - 1].index - 1 : ids[at + 1].index + 1;
      if (bad == 2) ids[at].index = 0x80000000u + at;  // above all the others
      for (size_t begin = 0; begin <= ids.size(); ++begin)
        for (size_t end = begin; end <= ids.size(); ++end) {
          const bool expected = reference(ids, begin, end);
          ASSERT_EQ(indicesAscending(ids, begin, end), expected)
              << "place " << at << " kind " << bad << " range " << begin << ".." << end;
          ++checked;
          rejected += !expected;
        }
    }
  EXPECT_GT(rejected, checked / 4);  // the cases do test the rejection
}

// The form for bare indices agrees with the one for handles on every range.
TEST(IndicesAscending, BareIndicesAsHandles) {
  std::mt19937 rng(5);
  for (int round = 0; round < 200; ++round) {
    std::vector<ProxyId> ids(1 + rng() % 40);
    std::vector<uint32_t> indices(ids.size());
    uint32_t at = rng() % 8;
    for (size_t k = 0; k < ids.size(); ++k) {
      at += rng() % 4 == 0 ? uint32_t(-int(rng() % 3)) : 1 + rng() % 3;  // now and then back
      indices[k] = at;
      ids[k] = ProxyId{at, uint32_t(k)};
    }
    for (size_t begin = 0; begin <= ids.size(); ++begin)
      for (size_t end = begin; end <= ids.size(); ++end)
        ASSERT_EQ(indicesAscending(std::span<const uint32_t>(indices), begin, end),
                  indicesAscending(std::span<const ProxyId>(ids), begin, end))
            << "round " << round << " range " << begin << ".." << end;
  }
}

}  // namespace
}  // namespace bp
