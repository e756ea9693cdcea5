// The loss curve of a run as a self-contained SVG (SPEC 6: "a loss-curve
// plot"), written by hand so the engine needs no plotting dependency and the
// file opens in any browser. Training loss is a line, validation loss dots.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace tessel::train {

struct LossCurve {
  std::string title;
  std::vector<std::pair<int64_t, double>> train;  // (step, loss)
  std::vector<std::pair<int64_t, double>> val;
};

// The SVG document text. Non-finite losses are skipped (a diverged step would
// otherwise flatten the whole plot).
std::string loss_curve_svg(const LossCurve& curve);

// Writes loss_curve_svg(curve) to `path` (atomically: a temporary file, then
// rename). Throws tessel::Error when the file cannot be written.
void write_loss_curve_svg(const LossCurve& curve, const std::filesystem::path& path);

}  // namespace tessel::train
