#include "train/loss_curve_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "io/atomic_file.h"

namespace tessel::train {

namespace {

constexpr double kWidth = 720, kHeight = 400;
constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 50;

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string loss_curve_svg(const LossCurve& curve) {
  double x_min = std::numeric_limits<double>::max(), x_max = std::numeric_limits<double>::lowest();
  double y_min = x_min, y_max = x_max;
  auto extend = [&](const std::vector<std::pair<int64_t, double>>& pts) {
    for (const auto& [s, l] : pts) {
      if (!std::isfinite(l)) continue;
      x_min = std::min(x_min, static_cast<double>(s));
      x_max = std::max(x_max, static_cast<double>(s));
      y_min = std::min(y_min, l);
      y_max = std::max(y_max, l);
    }
  };
  extend(curve.train);
  extend(curve.val);
  const bool empty = x_min > x_max;
  if (empty) x_min = 0, x_max = 1, y_min = 0, y_max = 1;
  if (x_max == x_min) x_max = x_min + 1;
  if (y_max == y_min) y_max = y_min + 1;
  const double pad = 0.05 * (y_max - y_min);
  y_min -= pad;
  y_max += pad;
  const double pw = kWidth - kLeft - kRight, ph = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x_min) / (x_max - x_min) * pw; };
  auto py = [&](double y) { return kTop + (1.0 - (y - y_min) / (y_max - y_min)) * ph; };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" font-size=\"15\">{3}</text>\n",
      kWidth, kHeight, kLeft, escape(curve.title));
  // Axes with five ticks each.
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#444\"/>\n",
                     kLeft, kTop, pw, ph);
  for (int i = 0; i <= 4; ++i) {
    const double fy = y_min + (y_max - y_min) * i / 4.0;
    const double fx = x_min + (x_max - x_min) * i / 4.0;
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#ddd\"/>\n"
                       "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:.3f}</text>\n",
                       kLeft, kLeft + pw, py(fy), kLeft - 6, py(fy) + 4, fy);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:.0f}</text>\n", px(fx),
                       kTop + ph + 18, fx);
  }
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">step</text>\n",
                     kLeft + pw / 2, kHeight - 10);
  svg += fmt::format("<text x=\"16\" y=\"{:.1f}\" transform=\"rotate(-90 16 {:.1f})\" "
                     "text-anchor=\"middle\">loss</text>\n",
                     kTop + ph / 2, kTop + ph / 2);
  std::string points;
  for (const auto& [s, l] : curve.train) {
    if (!std::isfinite(l)) continue;
    points += fmt::format("{:.1f},{:.1f} ", px(static_cast<double>(s)), py(l));
  }
  if (!points.empty()) {
    svg += fmt::format("<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"{}\"/>\n",
                       points);
  }
  for (const auto& [s, l] : curve.val) {
    if (!std::isfinite(l)) continue;
    svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#d62728\"/>\n",
                       px(static_cast<double>(s)), py(l));
  }
  // Legend.
  const double lx = kLeft + pw - 150;
  svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#1f77b4\" stroke-width=\"2\"/>"
                     "<text x=\"{3}\" y=\"{4}\">train loss</text>\n",
                     lx, lx + 20, kTop + 16, lx + 26, kTop + 20);
  if (!curve.val.empty()) {
    svg += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"#d62728\"/>"
                       "<text x=\"{}\" y=\"{}\">validation loss</text>\n",
                       lx + 10, kTop + 34, lx + 26, kTop + 38);
  }
  svg += "</svg>\n";
  return svg;
}

void write_loss_curve_svg(const LossCurve& curve, const std::filesystem::path& path) {
  io::write_file_atomically(path, loss_curve_svg(curve));
}

}  // namespace tessel::train
