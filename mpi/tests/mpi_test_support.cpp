#include "mpi_test_support.h"

#include <broadphase/pair.h>

#include <mpi.h>

#include <algorithm>
#include <sstream>

namespace bp::mpi::test {

int worldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int worldSize() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

std::vector<GlobalPair> allGather(std::span<const GlobalPair> mine) {
  const int size = worldSize();
  std::vector<int> counts(static_cast<size_t>(size)), displs(static_cast<size_t>(size));
  const int count = int(mine.size() * sizeof(GlobalPair));
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < size; ++r) {
    displs[size_t(r)] = total;
    total += counts[size_t(r)];
  }
  std::vector<GlobalPair> all(size_t(total) / sizeof(GlobalPair));
  MPI_Allgatherv(mine.data(), count, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE,
                 MPI_COMM_WORLD);
  std::sort(all.begin(), all.end(), pairBefore);
  return all;
}

Frame allGather(const GlobalFrame& mine) {
  return {allGather(mine.pairs), allGather(mine.begun), allGather(mine.ended)};
}

bool allRanks(bool ok) {
  int value = ok ? 1 : 0;
  MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  return value == 1;
}

uint64_t hashIds(const std::vector<GlobalPair>& pairs) {
  std::vector<Pair> p;
  p.reserve(pairs.size());
  for (const GlobalPair& g : pairs) p.push_back({uint32_t(g.a), uint32_t(g.b)});
  return hashPairs(p);
}

::testing::AssertionResult samePairs(const std::vector<GlobalPair>& expected,
                                     const std::vector<GlobalPair>& actual) {
  if (expected == actual) return ::testing::AssertionSuccess();
  std::ostringstream out;
  out << "expected " << expected.size() << " pairs, got " << actual.size()
      << "; first differences:";
  auto text = [](const GlobalPair& p) {
    std::ostringstream s;
    s << "(" << p.a << ", " << p.b << "; " << p.userDataA << ", " << p.userDataB << ")";
    return s.str();
  };
  size_t i = 0, j = 0;
  int shown = 0;
  while ((i < expected.size() || j < actual.size()) && shown < 8) {
    if (j == actual.size() || (i < expected.size() && pairBefore(expected[i], actual[j]))) {
      out << "\n  missing " << text(expected[i++]);
      ++shown;
    } else if (i == expected.size() || pairBefore(actual[j], expected[i])) {
      out << "\n  extra   " << text(actual[j++]);
      ++shown;
    } else {
      if (!(expected[i] == actual[j])) {
        out << "\n  expected " << text(expected[i]) << " got " << text(actual[j]);
        ++shown;
      }
      ++i;
      ++j;
    }
  }
  return ::testing::AssertionFailure() << out.str();
}

void Model::add(uint64_t id, const ProxyDesc& desc) {
  const ProxyId h = bp_.add(desc);
  handles_[id] = h;
  if (h.index >= ids_.size()) ids_.resize(size_t(h.index) + 1);
  ids_[h.index] = id;
}

std::vector<GlobalPair> Model::toGlobal(std::span<const ProxyPair> pairs) const {
  std::vector<GlobalPair> out;
  out.reserve(pairs.size());
  for (const ProxyPair& p : pairs) {
    GlobalPair g{ids_[p.a], ids_[p.b], p.userDataA, p.userDataB};
    if (g.a > g.b) {
      std::swap(g.a, g.b);
      std::swap(g.userDataA, g.userDataB);
    }
    out.push_back(g);
  }
  std::sort(out.begin(), out.end(), pairBefore);
  return out;
}

Frame Model::update() {
  for (uint64_t id : removes_) {
    bp_.remove(handles_.at(id));
    handles_.erase(id);
  }
  removes_.clear();
  const FramePairs& f = bp_.update();
  return {toGlobal(f.pairs), toGlobal(f.begun), toGlobal(f.ended)};
}

}  // namespace bp::mpi::test
