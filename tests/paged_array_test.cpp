// PagedArray (common/paged_array.h): entries read as absent until their
// page is made, a page made by its first write and kept, copies and the
// pages of another made.
#include "common/paged_array.h"
#include "common/assert.h"

#include <gtest/gtest.h>

#include <vector>

namespace bp {
namespace {

TEST(PagedArray, AnEntryAtAHighIndexMakesOnePage) {
  PagedArray<double> a;
  EXPECT_EQ(a.find(0), nullptr);
  EXPECT_EQ(a.extent(), 0u);
  const uint32_t high = 5'000'000;
  a.at(high) = 2.5;
  ASSERT_NE(a.find(high), nullptr);
  EXPECT_EQ(*a.find(high), 2.5);
  EXPECT_EQ(a[high], 2.5);
  EXPECT_EQ(*a.find(high + 1), 0.0);  // the same page, value-initialised
  EXPECT_EQ(a.find(high - PagedArray<double>::kPageSize), nullptr);
  EXPECT_EQ(a.find(0), nullptr);
  EXPECT_GT(a.extent(), high);
  // One page of entries and the list of pages, not an array up to `high`.
  EXPECT_LT(a.memoryBytes(), size_t(PagedArray<double>::kPageSize) * sizeof(double) +
                                 (high / PagedArray<double>::kPageSize + 1) * 32);
}

TEST(PagedArray, ForEachMadeVisitsTheMadePagesInIndexOrder) {
  PagedArray<int> a;
  a.at(3000) = 7;
  a.at(10) = 5;
  std::vector<uint32_t> seen;
  a.forEachMade([&](uint32_t i, int v) {
    if (v != 0) seen.push_back(i);
  });
  EXPECT_EQ(seen, (std::vector<uint32_t>{10, 3000}));
  uint32_t visited = 0;
  a.forEachMade([&](uint32_t, int) { ++visited; });
  EXPECT_EQ(visited, 2 * PagedArray<int>::kPageSize);
}

TEST(PagedArray, CopiesAndPagesOfAnother) {
  PagedArray<int> a, b;
  a.at(1) = 1;
  a.at(2048) = 2;
  b = a;
  EXPECT_EQ(b[2048], 2);
  a[2048] = 3;
  EXPECT_EQ(b[2048], 2);  // a deep copy
  PagedArray<int> c;
  c.at(5000) = 9;
  c.makePagesOf(a);
  ASSERT_NE(c.find(2048), nullptr);
  EXPECT_EQ(c[2048], 0);  // made, not copied
  EXPECT_EQ(c[5000], 9);  // its own page kept
  c.swap(b);
  EXPECT_EQ(c[1], 1);
  c.clear();
  EXPECT_EQ(c.find(1), nullptr);
}

#if BP_ASSERTS_ON
// In the builds that check invariants (Debug, the sanitizer builds), an
// entry of a page never made is a broken invariant, not a read of garbage.
TEST(PagedArrayDeathTest, AnEntryOfAPageNeverMadeIsABrokenInvariant) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  PagedArray<int> a;
  a.at(5) = 1;
  EXPECT_DEATH((void)a[5000], "invariant broken");
}
#endif

}  // namespace
}  // namespace bp
