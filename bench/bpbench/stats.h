// Order statistics of frame times.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
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

namespace bpbench {

// Percentiles of a stream of positive values in fixed memory: log-spaced bins
// 1% apart from 1e-4 to 1e7 (ms: 100 ns to 3 hours). A percentile is exact
// to within 1%; the maximum is exact. For long runs whose own bookkeeping
// must not grow (stress measures the RSS).
class StreamPercentiles {
 public:
  StreamPercentiles() : bins_(kBins, 0) {}
  void add(double v) {
    ++count_;
    max_ = std::max(max_, v);
    bins_[binOf(v)]++;
  }
  uint64_t count() const { return count_; }
  double max() const { return count_ ? max_ : NAN; }
  // Nearest rank, reported as the geometric middle of its bin (clamped to max).
  double percentile(double p) const {
    if (!count_) return NAN;
    uint64_t rank = static_cast<uint64_t>(std::ceil(p / 100.0 * double(count_)));
    rank = std::clamp<uint64_t>(rank, 1, count_);
    uint64_t seen = 0;
    for (size_t b = 0; b < bins_.size(); ++b) {
      seen += bins_[b];
      if (seen >= rank) return std::min(max_, kLo * std::pow(kStep, double(b) + 0.5));
    }
    return max_;
  }

 private:
  static constexpr double kLo = 1e-4, kStep = 1.01;
  static constexpr size_t kBins = 2547;  // log(1e11) / log(1.01) + 2
  static size_t binOf(double v) {
    if (!(v > kLo)) return 0;
    const double b = std::floor(std::log(v / kLo) / std::log(kStep));
    return std::min<size_t>(kBins - 1, static_cast<size_t>(b));
  }
  std::vector<uint64_t> bins_;
  uint64_t count_ = 0;
  double max_ = 0;
};

// At most `cap` (x, y) samples of a long series, evenly spaced in sample
// number: when full, every other sample is dropped and the stride doubles.
class Downsampled {
 public:
  explicit Downsampled(size_t cap) : cap_(cap) { points_.reserve(cap); }
  void add(double x, double y) {
    if (seen_++ % stride_ != 0) return;
    if (points_.size() == cap_) {
      for (size_t i = 0; i < cap_ / 2; ++i) points_[i] = points_[2 * i];
      points_.resize(cap_ / 2);
      stride_ *= 2;
      if ((seen_ - 1) % stride_ != 0) return;
    }
    points_.push_back({x, y});
  }
  const std::vector<std::pair<double, double>>& points() const { return points_; }

 private:
  size_t cap_;
  uint64_t seen_ = 0, stride_ = 1;
  std::vector<std::pair<double, double>> points_;
};

}  // namespace bpbench
