#include "common/handle_pool.h"

#include "common/assert.h"

#include <algorithm>
#include <atomic>
#include <string>
#include <utility>

namespace bp {

namespace {
// Each pool starts its generations at a different salt so that handles of two
// pools rarely coincide; the golden-ratio step spreads consecutive pools.
uint32_t nextSalt() {
  static std::atomic<uint32_t> counter{0};
  return (counter.fetch_add(1, std::memory_order_relaxed) + 1) * 0x9E3779B9u;
}
}  // namespace

HandlePool::HandlePool() : salt_(nextSalt()) {}

ProxyId HandlePool::allocate() {
  uint32_t index;
  if (!free_.empty()) {
    index = free_.back();
    free_.pop_back();
  } else {
    index = static_cast<uint32_t>(generation_.size());
    generation_.push_back(salt_);
    live_.push_back(0);  // (the padding moves up one: all its bytes stay 0)
  }
  live_[index] = 1;
  ++liveCount_;
  return {index, generation_[index]};
}

// The caller checked that id is live (isLive): a stale id released would
// free an index twice.
void HandlePool::release(ProxyId id) {
  BP_ASSERT(isLive(id));
  live_[id.index] = 0;
  ++generation_[id.index];
  free_.push_back(id.index);
  --liveCount_;
}

void HandlePool::reserve(uint32_t n) {
  generation_.reserve(n);
  live_.reserve(size_t(n) + kLivePadding);
  free_.reserve(n);
}

void HandlePool::clear() {
  for (uint32_t i = 0; i < generation_.size(); ++i)
    if (live_[i]) ++generation_[i];
  // Slots stay allocated (their generations must never repeat) but all are free,
  // reused from index 0 upward.
  free_.clear();
  for (uint32_t i = static_cast<uint32_t>(generation_.size()); i-- > 0;) free_.push_back(i);
  std::fill(live_.begin(), live_.end(), 0);
  liveCount_ = 0;
}

void HandlePool::restore(std::vector<uint32_t> generations, std::vector<uint32_t> freeList,
                         uint32_t salt) {
  const size_t cap = generations.size();
  std::vector<uint8_t> live(cap + kLivePadding, 0);
  std::fill_n(live.begin(), cap, uint8_t(1));
  for (uint32_t i : freeList) live[i] = 0;
  generation_ = std::move(generations);
  live_ = std::move(live);
  liveCount_ = static_cast<uint32_t>(cap - freeList.size());
  free_ = std::move(freeList);
  salt_ = salt;
}

std::string HandlePool::validate() const {
  const uint32_t cap = capacity();
  if (live_.size() != size_t(cap) + kLivePadding) return "live flags not capacity() + padding long";
  for (uint32_t k = cap; k < live_.size(); ++k)
    if (live_[k]) return "live flag padding not 0";
  std::vector<uint8_t> seen(cap, 0);
  for (uint32_t i : free_) {
    if (i >= cap) return "free list holds index " + std::to_string(i) + " out of range";
    if (live_[i]) return "free list holds live index " + std::to_string(i);
    if (seen[i]++) return "free list holds index " + std::to_string(i) + " twice";
  }
  uint32_t live = 0;
  for (uint32_t i = 0; i < cap; ++i) live += live_[i];
  if (live != liveCount_) return "live count mismatch";
  if (live + free_.size() != cap) return "a slot is neither live nor free";
  return {};
}

}  // namespace bp
