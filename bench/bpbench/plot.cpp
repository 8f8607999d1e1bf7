#include "plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace bpbench {
namespace {

const char* const kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<')
      o += "&lt;";
    else if (c == '>')
      o += "&gt;";
    else if (c == '&')
      o += "&amp;";
    else if (c == '"')
      o += "&quot;";
    else
      o += c;
  }
  return o;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// A short label for a tick value: 1e+05 as 100k, 0.25 as 0.25.
std::string tickLabel(double v) {
  char buf[32];
  const double a = std::fabs(v);
  if (a >= 1e6 && std::fmod(a, 1e6) == 0)
    std::snprintf(buf, sizeof buf, "%gM", v / 1e6);
  else if (a >= 1e3 && std::fmod(a, 1e3) == 0)
    std::snprintf(buf, sizeof buf, "%gk", v / 1e3);
  else
    std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

struct Axis {
  bool log;
  double lo, hi;  // in data units
  std::vector<double> ticks;

  double t(double v) const { return log ? std::log10(v) : v; }
  double frac(double v) const {
    const double a = t(lo), b = t(hi);
    return b > a ? (t(v) - a) / (b - a) : 0.5;
  }
};

Axis makeAxis(std::vector<double> values, bool log, bool integerTicks) {
  Axis ax{log, 0, 1, {}};
  if (log)
    values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !(v > 0); }),
                 values.end());
  if (values.empty()) values = {1};
  double lo = *std::min_element(values.begin(), values.end());
  double hi = *std::max_element(values.begin(), values.end());
  if (log) {
    const double l = std::floor(std::log10(lo)), h = std::ceil(std::log10(hi));
    ax.lo = std::pow(10.0, l);
    ax.hi = std::pow(10.0, h > l ? h : l + 1);
    for (double e = std::log10(ax.lo); e <= std::log10(ax.hi) + 1e-9; e += 1) {
      ax.ticks.push_back(std::pow(10.0, e));
      // 2x and 5x ticks when the range is short.
      if (std::log10(ax.hi) - std::log10(ax.lo) <= 2 && e < std::log10(ax.hi) - 1e-9) {
        ax.ticks.push_back(2 * std::pow(10.0, e));
        ax.ticks.push_back(5 * std::pow(10.0, e));
      }
    }
    return ax;
  }
  if (lo > 0 && !integerTicks) lo = 0;  // thread counts start at the first one
  if (hi <= lo) hi = lo + 1;
  const double rough = (hi - lo) / 6;
  const double mag = std::pow(10.0, std::floor(std::log10(rough)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (mag * m >= rough) {
      step = mag * m;
      break;
    }
  if (integerTicks) step = std::max(1.0, std::round(step));
  ax.lo = std::floor(lo / step) * step;
  ax.hi = std::ceil(hi / step) * step;
  for (double v = ax.lo; v <= ax.hi + step * 1e-9; v += step) ax.ticks.push_back(v);
  return ax;
}

}  // namespace

std::string renderSvg(const PlotSpec& spec) {
  const double W = 760, H = 490, left = 80, right = 190, top = 60, bottom = 60;
  const double pw = W - left - right, ph = H - top - bottom;
  std::vector<double> xs, ys;
  for (const PlotSeries& s : spec.series)
    for (auto [x, y] : s.points) xs.push_back(x), ys.push_back(y);
  const Axis ax = makeAxis(xs, spec.logX, !spec.logX);
  const Axis ay = makeAxis(ys, spec.logY, false);
  auto px = [&](double x) { return left + ax.frac(x) * pw; };
  auto py = [&](double y) { return top + (1 - ay.frac(y)) * ph; };

  std::ostringstream o;
  o << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << " " << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << num(left + pw / 2) << "\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">"
    << escape(spec.title) << "</text>\n"
    << "<text x=\"" << num(left + pw / 2) << "\" y=\"44\" text-anchor=\"middle\" fill=\"#555\">"
    << escape(spec.subtitle) << "</text>\n";
  // Grid and ticks.
  for (double t : ax.ticks) {
    const double x = px(t);
    o << "<line x1=\"" << num(x) << "\" y1=\"" << num(top) << "\" x2=\"" << num(x) << "\" y2=\""
      << num(top + ph) << "\" stroke=\"#e4e4e4\"/>\n"
      << "<text x=\"" << num(x) << "\" y=\"" << num(top + ph + 18) << "\" text-anchor=\"middle\">"
      << escape(tickLabel(t)) << "</text>\n";
  }
  for (double t : ay.ticks) {
    const double y = py(t);
    o << "<line x1=\"" << num(left) << "\" y1=\"" << num(y) << "\" x2=\"" << num(left + pw)
      << "\" y2=\"" << num(y) << "\" stroke=\"#e4e4e4\"/>\n"
      << "<text x=\"" << num(left - 8) << "\" y=\"" << num(y + 4) << "\" text-anchor=\"end\">"
      << escape(tickLabel(t)) << "</text>\n";
  }
  o << "<rect x=\"" << num(left) << "\" y=\"" << num(top) << "\" width=\"" << num(pw)
    << "\" height=\"" << num(ph) << "\" fill=\"none\" stroke=\"#333\"/>\n";
  o << "<text x=\"" << num(left + pw / 2) << "\" y=\"" << num(H - 18)
    << "\" text-anchor=\"middle\">" << escape(spec.xLabel) << (spec.logX ? " (log)" : "")
    << "</text>\n";
  o << "<text transform=\"translate(22 " << num(top + ph / 2)
    << ") rotate(-90)\" text-anchor=\"middle\">" << escape(spec.yLabel)
    << (spec.logY ? " (log)" : "") << "</text>\n";
  // Series.
  size_t colourIndex = 0;
  for (size_t i = 0; i < spec.series.size(); ++i) {
    const PlotSeries& s = spec.series[i];
    if (i > 0 && !s.dashed) ++colourIndex;
    if (s.colour >= 0) colourIndex = static_cast<size_t>(s.colour);
    const char* colour = kColours[colourIndex % std::size(kColours)];
    const char* dash = s.dashed ? "\" stroke-dasharray=\"6 4" : "";
    std::vector<std::pair<double, double>> pts = s.points;
    std::sort(pts.begin(), pts.end());
    o << "<g><title>" << escape(s.name) << "</title>\n<polyline fill=\"none\" stroke=\"" << colour
      << dash << "\" stroke-width=\"2\" points=\"";
    for (auto [x, y] : pts) o << num(px(x)) << "," << num(py(y)) << " ";
    o << "\"/>\n";
    // Markers, unless dashed or too many to tell apart.
    for (auto [x, y] : s.dashed || pts.size() > 200 ? decltype(pts){} : pts)
      o << "<circle cx=\"" << num(px(x)) << "\" cy=\"" << num(py(y)) << "\" r=\"4\" fill=\""
        << colour << "\"><title>" << escape(s.name) << ": " << tickLabel(x) << ", " << y
        << "</title></circle>\n";
    o << "</g>\n";
    const double ly = top + 14 + 20 * double(i);
    o << "<line x1=\"" << num(left + pw + 16) << "\" y1=\"" << num(ly) << "\" x2=\""
      << num(left + pw + 40) << "\" y2=\"" << num(ly) << "\" stroke=\"" << colour << dash
      << "\" stroke-width=\"2\"/>\n"
      << "<text x=\"" << num(left + pw + 46) << "\" y=\"" << num(ly + 4) << "\">" << escape(s.name)
      << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

void writeSvg(const std::string& path, const PlotSpec& spec) {
  std::ofstream f(path);
  if (!f) throw std::runtime_error("--plot: cannot write '" + path + "'");
  f << renderSvg(spec);
  if (!f) throw std::runtime_error("--plot: error writing '" + path + "'");
  std::fprintf(stderr, "bpbench: wrote %s\n", path.c_str());
}

}  // namespace bpbench
