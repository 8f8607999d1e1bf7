#include "exchange.h"

#include <algorithm>
#include <climits>

namespace bp::mpi::detail {

namespace {

// MPI counts are ints: a buffer travels in pieces of at most this many bytes.
// Pieces of one buffer share source, tag and communicator, so MPI delivers
// them in order into the consecutive receives posted for them.
constexpr uint64_t kPiece = uint64_t(1) << 30;

uint64_t pieces(uint64_t bytes) { return (bytes + kPiece - 1) / kPiece; }

}  // namespace

uint64_t Exchange::run(MPI_Comm comm, int tag, uint64_t flag, Traffic& traffic) {
  const InMpi timer(traffic);
  const size_t size = send_.size();
  int self = 0;
  MPI_Comm_rank(comm, &self);
  // Per destination: bytes, then the flag.
  sizesOut_.assign(2 * size, 0);
  sizesIn_.assign(2 * size, 0);
  for (size_t r = 0; r < size; ++r) {
    sizesOut_[2 * r] = int(r) == self ? 0 : send_[r].size();
    sizesOut_[2 * r + 1] = flag;
  }
  MPI_Alltoall(sizesOut_.data(), 2, MPI_UINT64_T, sizesIn_.data(), 2, MPI_UINT64_T, comm);
  ++traffic.collectives;

  uint64_t flags = 0;
  requests_.clear();
  for (size_t r = 0; r < size; ++r) {
    flags |= sizesIn_[2 * r + 1];
    if (int(r) == self) {
      recv_[r].swap(send_[r]);
      send_[r].clear();
      continue;
    }
    const uint64_t bytes = sizesIn_[2 * r];
    recv_[r].resize(bytes);
    for (uint64_t at = 0; at < bytes; at += kPiece) {
      requests_.emplace_back();
      MPI_Irecv(recv_[r].data() + at, int(std::min(kPiece, bytes - at)), MPI_BYTE, int(r), tag,
                comm, &requests_.back());
    }
    traffic.bytesReceived += bytes;
    traffic.messagesReceived += uint32_t(pieces(bytes));
  }
  for (size_t r = 0; r < size; ++r) {
    const uint64_t bytes = sizesOut_[2 * r];
    for (uint64_t at = 0; at < bytes; at += kPiece) {
      requests_.emplace_back();
      MPI_Isend(send_[r].data() + at, int(std::min(kPiece, bytes - at)), MPI_BYTE, int(r), tag,
                comm, &requests_.back());
    }
    traffic.bytesSent += bytes;
    traffic.messagesSent += uint32_t(pieces(bytes));
  }
  MPI_Waitall(int(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  return flags;
}

void Exchange::trim() {
  for (auto& b : send_) detail::trim(b);
  for (auto& b : recv_) detail::trim(b);
}

void Exchange::clear() {
  for (auto& b : send_) b.clear();
  for (auto& b : recv_) b.clear();
}

uint64_t allGather(MPI_Comm comm, std::span<const std::byte> mine, uint64_t flag,
                   std::vector<std::byte>& all, std::vector<uint64_t>& offsets, Traffic& traffic) {
  const InMpi timer(traffic);
  int size = 1;
  MPI_Comm_size(comm, &size);
  std::vector<uint64_t> sizes(2 * static_cast<size_t>(size));
  const uint64_t out[2] = {mine.size(), flag};
  MPI_Allgather(out, 2, MPI_UINT64_T, sizes.data(), 2, MPI_UINT64_T, comm);
  offsets.assign(size_t(size) + 1, 0);
  uint64_t flags = 0;
  for (size_t r = 0; r < size_t(size); ++r) {
    offsets[r + 1] = offsets[r] + sizes[2 * r];
    flags |= sizes[2 * r + 1];
  }
  all.resize(offsets.back());
  // Allgatherv counts are ints. Queries are small, so this library only
  // gathers what fits; every rank sees the same sizes and so takes the same
  // branch, and the caller reports the flag.
  if (offsets.back() > uint64_t(INT_MAX)) {
    traffic.collectives += 1;
    return flags | (uint64_t(1) << 63);
  }
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  for (size_t r = 0; r < size_t(size); ++r) {
    counts[r] = int(sizes[2 * r]);
    displs[r] = int(offsets[r]);
  }
  MPI_Allgatherv(mine.data(), int(mine.size()), MPI_BYTE, all.data(), counts.data(), displs.data(),
                 MPI_BYTE, comm);
  traffic.collectives += 2;
  traffic.bytesSent += mine.size() * uint64_t(size - 1);
  traffic.bytesReceived += offsets.back() - mine.size();
  return flags;
}

}  // namespace bp::mpi::detail
