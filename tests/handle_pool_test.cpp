// HandlePool (broadphase/src/common/handle_pool.h): where every ProxyId comes
// from. Its promises: a fresh pool issues 0, 1, 2, ...; a released handle and
// every copy of it are stale from then on; slots are reused last-freed first;
// clear() stales every live handle and reuses indices from 0 upward; two
// pools almost never accept each other's handles; restore() rebuilds a pool
// that issues what the saved one would have; isLiveBranchFree() agrees with
// isLive() on every input.
#include "common/handle_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <random>
#include <vector>

namespace bp {
namespace {

// `count` fresh handles of `pool`, then the slots of `released` freed in
// that order.
std::vector<ProxyId> allocateThenRelease(HandlePool& pool, int count,
                                         std::initializer_list<int> released) {
  std::vector<ProxyId> ids;
  for (int i = 0; i < count; ++i) ids.push_back(pool.allocate());
  for (const int k : released) pool.release(ids[size_t(k)]);
  return ids;
}

TEST(HandlePool, FreshPoolIssuesDenseIndicesInOrder) {
  HandlePool pool;
  for (uint32_t i = 0; i < 100; ++i) {
    const ProxyId id = pool.allocate();
    EXPECT_EQ(id.index, i);
    EXPECT_EQ(id.generation, pool.salt());
    EXPECT_TRUE(pool.isLive(id));
  }
  EXPECT_EQ(pool.capacity(), 100u);
  EXPECT_EQ(pool.liveCount(), 100u);
  EXPECT_EQ(pool.validate(), "");
}

// memoryBytes() counts what the pool holds: a generation and a live flag a
// slot, and a free list only once slots are freed.
TEST(HandlePool, MemoryBytesCountsWhatThePoolHolds) {
  HandlePool pool;
  for (uint32_t i = 0; i < 1000; ++i) pool.allocate();
  EXPECT_GE(pool.memoryBytes(), 1000u * 5);
  EXPECT_LT(pool.memoryBytes(), 1000u * 9);
  for (uint32_t i = 0; i < 1000; ++i) pool.release(pool.handleOf(i));
  EXPECT_GE(pool.memoryBytes(), 1000u * 9);
}

TEST(HandlePool, ReleasedHandleAndItsCopiesAreStaleEvenAfterReuse) {
  HandlePool pool;
  const ProxyId a = pool.allocate();
  const ProxyId copy = a;
  pool.release(a);
  EXPECT_FALSE(pool.isLive(a));
  EXPECT_FALSE(pool.isLive(copy));
  EXPECT_FALSE(pool.isLiveIndex(a.index));
  const ProxyId b = pool.allocate();  // the same slot, a new generation
  EXPECT_EQ(b.index, a.index);
  EXPECT_NE(b.generation, a.generation);
  EXPECT_TRUE(pool.isLive(b));
  EXPECT_FALSE(pool.isLive(copy));
  EXPECT_EQ(pool.handleOf(a.index), b);
}

TEST(HandlePool, ReusesSlotsLastFreedFirst) {
  HandlePool pool;
  allocateThenRelease(pool, 8, {2, 6, 4});
  EXPECT_EQ(pool.allocate().index, 4u);
  EXPECT_EQ(pool.allocate().index, 6u);
  EXPECT_EQ(pool.allocate().index, 2u);
  EXPECT_EQ(pool.allocate().index, 8u);  // then fresh slots again
  EXPECT_EQ(pool.validate(), "");
}

TEST(HandlePool, DefaultAndOutOfRangeHandlesAreNeverLive) {
  HandlePool pool;
  EXPECT_FALSE(pool.isLive(ProxyId{}));
  EXPECT_FALSE(pool.isLiveBranchFree(ProxyId{}));  // an empty pool reads nothing
  const ProxyId a = pool.allocate();
  EXPECT_FALSE(pool.isLive(ProxyId{}));
  EXPECT_FALSE(pool.isLive({a.index + 1, a.generation}));
  EXPECT_FALSE(pool.isLiveIndex(a.index + 1));
  EXPECT_FALSE(pool.isLiveBranchFree({UINT32_MAX, a.generation}));
}

TEST(HandlePool, ClearStalesEveryHandleAndReusesIndicesFromZero) {
  HandlePool pool;
  const std::vector<ProxyId> ids = allocateThenRelease(pool, 5, {1});
  pool.clear();
  EXPECT_EQ(pool.liveCount(), 0u);
  EXPECT_EQ(pool.capacity(), 5u);  // never shrinks
  for (const ProxyId& id : ids) EXPECT_FALSE(pool.isLive(id));
  for (uint32_t i = 0; i < 5; ++i) {
    const ProxyId id = pool.allocate();
    EXPECT_EQ(id.index, i);
    EXPECT_NE(id, ids[i]);  // no old handle is live again
  }
  EXPECT_EQ(pool.validate(), "");
}

TEST(HandlePool, PoolsRejectEachOthersHandles) {
  HandlePool a, b;
  EXPECT_NE(a.salt(), b.salt());
  std::vector<ProxyId> fromA;
  for (int i = 0; i < 16; ++i) {
    fromA.push_back(a.allocate());
    b.allocate();
  }
  for (const ProxyId& id : fromA) EXPECT_FALSE(b.isLive(id));
}

TEST(HandlePool, RestoreIssuesWhatTheSavedPoolWould) {
  HandlePool saved;
  const std::vector<ProxyId> ids = allocateThenRelease(saved, 10, {3, 7, 0});

  HandlePool loaded;
  loaded.restore(std::vector<uint32_t>(saved.generations(), saved.generations() + saved.capacity()),
                 saved.freeList(), saved.salt());
  EXPECT_EQ(loaded.validate(), "");
  EXPECT_EQ(loaded.liveCount(), saved.liveCount());
  for (const ProxyId& id : ids) EXPECT_EQ(loaded.isLive(id), saved.isLive(id));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(loaded.allocate(), saved.allocate());
}

TEST(HandlePool, BranchFreeCheckAgreesWithIsLiveOnRandomHandles) {
  HandlePool pool;
  std::mt19937 rng(7);
  std::vector<ProxyId> live;
  for (int i = 0; i < 200; ++i) live.push_back(pool.allocate());
  for (int i = 0; i < 60; ++i) {
    const size_t k = rng() % live.size();
    pool.release(live[k]);
    live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
  }
  for (int i = 0; i < 20; ++i) live.push_back(pool.allocate());
  for (int i = 0; i < 5000; ++i) {
    ProxyId id{uint32_t(rng() % 260), pool.salt() + uint32_t(rng() % 3)};
    if (i % 3 == 0) id = live[rng() % live.size()];
    ASSERT_EQ(pool.isLiveBranchFree(id), pool.isLive(id)) << id.index << " " << id.generation;
  }
  EXPECT_EQ(pool.validate(), "");
}

TEST(HandlePool, ValidateNamesAFreeListThatIsWrong) {
  HandlePool pool;
  for (int i = 0; i < 4; ++i) pool.allocate();
  // A free list naming a slot twice: restore's precondition broken on purpose.
  HandlePool bad;
  bad.restore({pool.salt(), pool.salt(), pool.salt(), pool.salt()}, {1, 1}, pool.salt());
  EXPECT_NE(bad.validate(), "");
}

}  // namespace
}  // namespace bp
