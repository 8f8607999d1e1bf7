// FilterStore (facade/filter_store.h): the default filter costs no slot, a
// proxy's own slot is rewritten in place and freed when it goes back to the
// default or is removed, and a freed slot is the next one given out;
// validate() catches a slot held twice, a slot both free and held, and a
// slot lost.
#include "facade/filter_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace bp {
namespace {

TEST(FilterStore, TheDefaultFilterTakesNoSlot) {
  FilterStore store;
  EXPECT_EQ(store.set(kDefaultFilter, Filter{}), kDefaultFilter);
  EXPECT_EQ(store.slotCount(), 1u);
  EXPECT_EQ(store[kDefaultFilter].category, Filter{}.category);
  EXPECT_EQ(store[kDefaultFilter].mask, Filter{}.mask);
  EXPECT_EQ(store.validate(std::vector<uint32_t>{kDefaultFilter, kDefaultFilter}), "");
}

TEST(FilterStore, SlotsAreRewrittenFreedAndReused) {
  FilterStore store;
  const uint32_t a = store.set(kDefaultFilter, Filter{2, 3});
  const uint32_t b = store.set(kDefaultFilter, Filter{4, 5});
  EXPECT_NE(a, kDefaultFilter);
  EXPECT_NE(a, b);
  EXPECT_EQ(store.set(a, Filter{6, 7}), a);  // its own slot, rewritten
  EXPECT_EQ(store[a].category, 6u);
  EXPECT_EQ(store[b].mask, 5u);
  EXPECT_EQ(store.set(a, Filter{}), kDefaultFilter);  // back to the default: freed
  EXPECT_EQ(store.freeCount(), 1u);
  EXPECT_EQ(store.validate(std::vector<uint32_t>{b}), "");
  EXPECT_EQ(store.set(kDefaultFilter, Filter{8, 9}), a);  // the freed slot, reused
  store.release(b);
  EXPECT_EQ(store.validate(std::vector<uint32_t>{a}), "");
  EXPECT_EQ(store.slotCount(), 3u);
}

TEST(FilterStore, ValidateFindsBrokenHolders) {
  FilterStore store;
  const uint32_t a = store.set(kDefaultFilter, Filter{2, 3});
  const uint32_t b = store.set(kDefaultFilter, Filter{4, 5});
  EXPECT_EQ(store.validate(std::vector<uint32_t>{a, b}), "");
  EXPECT_NE(store.validate(std::vector<uint32_t>{a, a, b}), "");  // held twice
  EXPECT_NE(store.validate(std::vector<uint32_t>{a}), "");        // b lost
  EXPECT_NE(store.validate(std::vector<uint32_t>{a, b, 7}), "");  // out of range
  store.release(b);
  EXPECT_NE(store.validate(std::vector<uint32_t>{a, b}), "");  // b free and held
}

// Random holders setting, clearing and dropping filters: every holder reads
// back its last filter, and the store never holds more slots than there
// were holders with a filter of their own at once.
TEST(FilterStore, RandomHoldersReadBackTheirFilters) {
  constexpr uint32_t kHolders = 64;
  FilterStore store;
  std::vector<uint32_t> slot(kHolders, kDefaultFilter);
  std::vector<Filter> expected(kHolders);
  std::mt19937 rng(9);
  uint32_t most = 0;
  for (int step = 0; step < 5000; ++step) {
    const uint32_t h = rng() % kHolders;
    if (rng() % 5 == 0) {  // removed (and a fresh holder in its place)
      store.release(slot[h]);
      slot[h] = kDefaultFilter;
      expected[h] = Filter{};
    } else {
      const Filter f = rng() % 3 == 0 ? Filter{} : Filter{uint64_t(rng() % 4), uint64_t(rng())};
      slot[h] = store.set(slot[h], f);
      expected[h] = f;
    }
    uint32_t own = 0;
    for (uint32_t k = 0; k < kHolders; ++k) {
      own += slot[k] != kDefaultFilter;
      ASSERT_EQ(store[slot[k]].category, expected[k].category) << "step " << step;
      ASSERT_EQ(store[slot[k]].mask, expected[k].mask) << "step " << step;
    }
    most = std::max(most, own);
    ASSERT_EQ(store.validate(slot), "") << "step " << step;
  }
  EXPECT_LE(store.slotCount(), most + 1);
}

}  // namespace
}  // namespace bp
