// BvhStack<T>: the explicit traversal stack of every tree walk.
//
// Queries never recurse and never truncate: the first kInline entries live
// in the object (on the caller's stack, no allocation for any sane tree),
// and a degenerate tree deeper than that spills into a heap vector that grows
// as needed.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

namespace bp {

template <class T>
class BvhStack {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  static constexpr std::size_t kInline = 128;

  BvhStack() = default;
  BvhStack(const BvhStack&) = delete;
  BvhStack& operator=(const BvhStack&) = delete;

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  void clear() { size_ = 0; }

  void push(const T& value) {
    if (size_ == capacity_) grow();
    data_[size_++] = value;
  }
  T pop() { return data_[--size_]; }

 private:
  void grow() {
    const std::size_t newCapacity = capacity_ * 2;
    std::vector<T> bigger(newCapacity);
    std::memcpy(bigger.data(), data_, size_ * sizeof(T));
    heap_ = std::move(bigger);
    data_ = heap_.data();
    capacity_ = newCapacity;
  }

  T inline_[kInline];
  std::vector<T> heap_;
  T* data_ = inline_;
  std::size_t size_ = 0;
  std::size_t capacity_ = kInline;
};

}  // namespace bp
