// PairBuffer: one worker's pair output, for kernels that write a whole SIMD
// block of candidate pairs and then advance by the number that passed (no
// branch per pair). The storage only grows, so a steady state allocates
// nothing and nothing is zeroed again; size() pairs are valid.
#pragma once

#include <broadphase/pair.h>

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace bp {

class PairBuffer {
 public:
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const Pair* data() const { return storage_.data(); }
  std::span<const Pair> pairs() const { return {storage_.data(), size_}; }
  std::span<Pair> pairs() { return {storage_.data(), size_}; }
  const Pair* begin() const { return storage_.data(); }
  const Pair* end() const { return storage_.data() + size_; }
  void clear() { size_ = charged_ = 0; }
  // The first charged() pairs are paid for with a PairBudget (see
  // PairBudget::settle); the ones after were found since.
  size_t charged() const { return charged_; }
  void setCharged(size_t n) { charged_ = n; }

  // Room for k more pairs at the returned pointer; advance(m <= k) keeps m.
  Pair* writable(size_t k) {
    if (storage_.size() - size_ < k) grow(k);
    return storage_.data() + size_;
  }
  void advance(size_t k) { size_ += k; }
  // For kernels that keep the write position in a register (a PairWriter).
  Pair* storageEnd() { return storage_.data() + storage_.size(); }
  void setEnd(const Pair* at) { size_ = size_t(at - storage_.data()); }
  void push(const Pair& p) {
    *writable(1) = p;
    ++size_;
  }
  // The storage from its start, grown to hold at least n pairs (the size()
  // pairs kept): for a sort that uses a buffer it has finished reading as
  // its scratch array.
  Pair* storageFor(size_t n) {
    if (storage_.size() < n) grow(n - size_);
    return storage_.data();
  }
  size_t memoryBytes() const { return storage_.capacity() * sizeof(Pair); }

 private:
  void grow(size_t k) { storage_.resize(std::max({2 * storage_.size(), size_ + k, size_t(1024)})); }

  std::vector<Pair> storage_;
  size_t size_ = 0;
  size_t charged_ = 0;
};

// A kernel's write position in registers: the kernel stores whole blocks of
// up to kBlock pairs at `at` and moves it by the number kept. A local object
// whose address does not escape, so the compiler keeps `at` and `end` in
// registers across the kernel's vector stores, which it could not do for a
// PairBuffer's fields (any store might alias them). finish() hands the
// pairs back.
class PairWriter {
 public:
  static constexpr size_t kBlock = 16;
  explicit PairWriter(PairBuffer& buffer) : buffer_(buffer) { refill(); }
  // Room for a block at the returned pointer.
  Pair* block() {
    if (size_t(end_ - at_) < kBlock) [[unlikely]]
      refill();
    return at_;
  }
  void advance(size_t k) { at_ += k; }
  void finish() { buffer_.setEnd(at_); }
  // The pairs the buffer holds with those written here.
  size_t size() const { return size_t(at_ - buffer_.data()); }
  // Carries on at the buffer's end after it was changed behind the writer
  // (finish() first): a budget's charge compacts or clears it.
  void reload() {
    at_ = buffer_.writable(kBlock);
    end_ = buffer_.storageEnd();
  }

 private:
  void refill() {
    if (at_) buffer_.setEnd(at_);
    at_ = buffer_.writable(kBlock);
    end_ = buffer_.storageEnd();
  }
  PairBuffer& buffer_;
  Pair* at_ = nullptr;
  Pair* end_ = nullptr;
};

}  // namespace bp
