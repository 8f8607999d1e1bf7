// The messages of DistributedBroadPhase: byte buffers written and read
// field by field, a sparse all-to-all over them, and an all-gather. Every
// byte and message is counted in a Traffic, which becomes FrameStats.
#pragma once

#include <broadphase/math/aabb.h>

#include <mpi.h>
#include <time.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

namespace bp::mpi::detail {

/// Appends trivially copyable values to a byte buffer (host byte order: the
/// ranks of one job share an architecture).
class ByteWriter {
 public:
  explicit ByteWriter(std::vector<std::byte>& buffer) : buffer_(buffer) {}
  template <class T>
  void put(const T& value) {
    static_assert(std::is_trivially_copyable_v<T>);
    const size_t at = buffer_.size();
    buffer_.resize(at + sizeof(T));
    std::memcpy(buffer_.data() + at, &value, sizeof(T));
  }
  // Eigen's vectors are not trivially copyable: their floats go one by one.
  void put(const Vec3& v) {
    put(v.x());
    put(v.y());
    put(v.z());
  }
  void put(const Aabb& box) {
    put(box.min);
    put(box.max);
  }
  void putBytes(std::span<const std::byte> bytes) {
    buffer_.insert(buffer_.end(), bytes.begin(), bytes.end());
  }

 private:
  std::vector<std::byte>& buffer_;
};

/// Reads back what a ByteWriter wrote, in the same order. The reader trusts
/// its input: the buffers come from this library on another rank.
class ByteReader {
 public:
  explicit ByteReader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  template <class T>
  T get() {
    static_assert(std::is_trivially_copyable_v<T>);
    T value;
    std::memcpy(&value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return value;
  }
  Vec3 getVec() {
    const float x = get<float>();
    const float y = get<float>();
    const float z = get<float>();
    return Vec3(x, y, z);
  }
  Aabb getBox() {
    const Vec3 lo = getVec();
    return {lo, getVec()};
  }
  std::span<const std::byte> getBytes(size_t n) {
    const std::span<const std::byte> out = bytes_.subspan(at_, n);
    at_ += n;
    return out;
  }
  bool done() const { return at_ >= bytes_.size(); }

 private:
  std::span<const std::byte> bytes_;
  size_t at_ = 0;
};

/// What one rank's MPI calls moved and cost.
struct Traffic {
  uint64_t bytesSent = 0;
  uint64_t bytesReceived = 0;
  uint32_t messagesSent = 0;
  uint32_t messagesReceived = 0;
  uint32_t collectives = 0;
  double seconds = 0;     ///< wall time inside MPI calls, waiting included
  double cpuSeconds = 0;  ///< the calling thread's CPU time inside them
};

/// Seconds since an arbitrary start (MPI_Wtime).
inline double now() { return MPI_Wtime(); }

/// The calling thread's CPU time in seconds: unlike wall time, it does not
/// grow while the thread waits for a core (on a machine shared with other
/// work, or with more ranks than cores).
inline double threadCpu() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

/// Adds the wall and CPU time of its scope to a Traffic: wrap each MPI call.
class InMpi {
 public:
  explicit InMpi(Traffic& traffic) : traffic_(traffic), wall_(now()), cpu_(threadCpu()) {}
  ~InMpi() {
    traffic_.seconds += now() - wall_;
    traffic_.cpuSeconds += threadCpu() - cpu_;
  }
  InMpi(const InMpi&) = delete;
  InMpi& operator=(const InMpi&) = delete;

 private:
  Traffic& traffic_;
  double wall_, cpu_;
};

/// A sparse all-to-all: one buffer per destination rank, one received per
/// source. The sizes travel first in one MPI_Alltoall, each with a flag word
/// that every rank ORs together (a cheap way to agree on an error); then
/// only the non-empty buffers move, point to point. A rank's buffer to itself
/// is handed over in memory (from(self) after run()), never sent or counted.
class Exchange {
 public:
  explicit Exchange(int size) : send_(size_t(size)), recv_(size_t(size)) {}
  std::vector<std::byte>& to(int rank) { return send_[size_t(rank)]; }
  std::span<const std::byte> from(int rank) const { return recv_[size_t(rank)]; }
  /// Collective over `comm`. Returns the OR of every rank's `flag`.
  uint64_t run(MPI_Comm comm, int tag, uint64_t flag, Traffic& traffic);
  /// Empties every buffer (capacity kept).
  void clear();
  /// Frees the buffers that hold far more than this exchange last moved
  /// (after a burst: the first distribution, a rebalance), keeping those a
  /// steady frame reuses.
  void trim();
  /// Heap bytes of the buffers (their capacity).
  size_t memoryBytes() const {
    size_t bytes = 0;
    for (const auto& b : send_) bytes += b.capacity();
    for (const auto& b : recv_) bytes += b.capacity();
    return bytes + (sizesOut_.capacity() + sizesIn_.capacity()) * sizeof(uint64_t);
  }

 private:
  std::vector<std::vector<std::byte>> send_;
  std::vector<std::vector<std::byte>> recv_;
  std::vector<uint64_t> sizesOut_, sizesIn_;
  std::vector<MPI_Request> requests_;
};

/// Collective: every rank's bytes, concatenated in rank order, into `all`;
/// `offsets` gets size + 1 entries (rank r's bytes are [offsets[r],
/// offsets[r + 1])). Returns the OR of every rank's `flag`.
uint64_t allGather(MPI_Comm comm, std::span<const std::byte> mine, uint64_t flag,
                   std::vector<std::byte>& all, std::vector<uint64_t>& offsets, Traffic& traffic);

/// Frees a vector's storage when it is much larger than what it holds now
/// (a burst's leftover), keeping it otherwise.
template <class T>
void trim(std::vector<T>& v) {
  if (v.capacity() * sizeof(T) > 65536 && v.capacity() > 2 * v.size()) std::vector<T>().swap(v);
}

}  // namespace bp::mpi::detail
