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

// Little byte buffer for the result of a child.
class Bytes {
 public:
  template <class T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const char*>(&v);
    data_.insert(data_.end(), p, p + sizeof(T));
  }
  template <class T>
  void putVector(const std::vector<T>& v) {
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
  template <class T>
  std::vector<T> getVector() {
    const auto n = get<uint64_t>();
    need(n * sizeof(T));
    std::vector<T> v(n);
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
