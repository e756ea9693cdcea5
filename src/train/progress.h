// What a person watching a run sees (SPEC 6): on a terminal, one line
// redrawn in place (\r) with a bar, step, loss, tokens/s and ETA; otherwise
// (a log file, a pipe, a test) one plain line per step that greps and diffs
// well. Validation results and the end-of-run summary are always full lines.
// Only rank 0 constructs one; other ranks print nothing.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "train/metrics.h"

namespace tessel::train {

class Progress {
 public:
  // `interactive`: redraw one line (use is_terminal(out)). `first_step` is
  // the step a resumed run starts from, so the ETA counts only this run's
  // steps. `shown`: the objective's metrics printed after the loss (DPO's
  // accuracy, ...).
  Progress(std::FILE* out, int64_t total_steps, bool interactive, int64_t first_step = 0,
           std::vector<std::string> shown = {});

  void step(const StepMetrics& m);
  void validation(const ValMetrics& m);
  // Ends the redrawn line (if any) and prints a one-line summary.
  void finish(const std::string& summary);

  static bool is_terminal(std::FILE* out);

 private:
  void end_bar_line();
  // "  accuracy 0.7500  reward_margin 0.1234" for the shown metrics present.
  std::string shown_metrics(const std::vector<std::pair<std::string, double>>& metrics) const;

  std::FILE* out_;
  int64_t total_;
  bool interactive_;
  int64_t first_step_;
  std::vector<std::string> shown_;
  double elapsed_s_ = 0.0;
  bool bar_open_ = false;
};

// "1:05", "1:02:03"
std::string format_duration(double seconds);

}  // namespace tessel::train
