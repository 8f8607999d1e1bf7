// Runs one measurement in a forked child process, so that each backend gets
// its own address space: its peak memory (VmHWM) is its own, and nothing it
// allocates or caches can help or hurt the next backend.
//
// The parent must not have started any threads before forking (it never
// creates a Scheduler); the child creates its own. The child sends its result
// back through a pipe as bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace bpbench {

// Anonymous pages the forked children do not inherit (mmap + MADV_DONTFORK).
void* mapDontFork(size_t bytes);
void unmapDontFork(void* p, size_t bytes);

// An allocator whose memory is not inherited by forked children
// (MADV_DONTFORK): the parent keeps large results of earlier backends (the
// hits of a million rays) in it, so that they do not count in the resident
// set, and so in the peak memory, of the children measured after them.
template <class T>
struct DontForkAllocator {
  using value_type = T;
  DontForkAllocator() = default;
  template <class U>
  DontForkAllocator(const DontForkAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(mapDontFork(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { unmapDontFork(p, n * sizeof(T)); }
  friend bool operator==(const DontForkAllocator&, const DontForkAllocator&) { return true; }
};

template <class T>
using ParentVector = std::vector<T, DontForkAllocator<T>>;

// Little byte buffer for the result of a child.
class Bytes {
 public:
  template <class T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const char*>(&v);
    data_.insert(data_.end(), p, p + sizeof(T));
  }
  template <class T, class Alloc>
  void putVector(const std::vector<T, Alloc>& v) {
    put<uint64_t>(v.size());
    const auto* p = reinterpret_cast<const char*>(v.data());
    data_.insert(data_.end(), p, p + v.size() * sizeof(T));
  }
  void putString(const std::string& s) {
    put<uint64_t>(s.size());
    data_.insert(data_.end(), s.begin(), s.end());
  }
  template <class T>
  T get() {
    T v;
    need(sizeof(T));
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  template <class T, class Alloc = std::allocator<T>>
  std::vector<T, Alloc> getVector() {
    const auto n = get<uint64_t>();
    need(n * sizeof(T));
    std::vector<T, Alloc> v(n);
    if (n) std::memcpy(v.data(), data_.data() + pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }
  std::string getString() {
    const auto n = get<uint64_t>();
    need(n);
    std::string s(data_.data() + pos_, n);
    pos_ += n;
    return s;
  }
  std::vector<char>& raw() { return data_; }

 private:
  void need(size_t n) const {
    if (pos_ + n > data_.size()) throw std::runtime_error("truncated result from child");
  }
  std::vector<char> data_;
  size_t pos_ = 0;
};

// Runs `work` (which fills the Bytes) in a forked child, or in this process
// when fork is false. Throws std::runtime_error with the child's message if
// it threw, crashed or was killed.
Bytes runIsolated(const std::function<void(Bytes&)>& work, bool fork);

}  // namespace bpbench
