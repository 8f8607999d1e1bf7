// A self-contained SVG line chart (no scripts, no external resources): one
// polyline with markers per series, axes with ticks, a legend.
#pragma once

#include <string>
#include <vector>

namespace bpbench {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y)
  bool dashed = false;  // drawn dashed, in the colour of the series before it
  int colour = -1;      // palette index; -1: the next colour (or the previous, if dashed)
};

struct PlotSpec {
  std::string title, subtitle, xLabel, yLabel;
  bool logX = false, logY = false;
  std::vector<PlotSeries> series;
};

// Throws std::runtime_error when the file cannot be written.
void writeSvg(const std::string& path, const PlotSpec& spec);
std::string renderSvg(const PlotSpec& spec);

}  // namespace bpbench
