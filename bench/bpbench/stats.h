// Order statistics of frame times.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace bpbench {

// Nearest-rank percentile (p in (0, 100]) of the values; NaN when empty.
inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * double(v.size())));
  rank = std::clamp<size_t>(rank, 1, v.size());
  return v[rank - 1];
}

// The median; the mean of the two middle values for an even count.
inline double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace bpbench
