#include "train/progress.h"

#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tessel::train {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  const int64_t h = total / 3600, m = (total / 60) % 60, s = total % 60;
  return h > 0 ? fmt::format("{}:{:02}:{:02}", h, m, s) : fmt::format("{}:{:02}", m, s);
}

Progress::Progress(std::FILE* out, int64_t total_steps, bool interactive, int64_t first_step,
                   std::vector<std::string> shown)
    : out_(out), total_(total_steps), interactive_(interactive), first_step_(first_step), shown_(std::move(shown)) {}

std::string Progress::shown_metrics(const std::vector<std::pair<std::string, double>>& metrics) const {
  std::string out;
  for (const auto& name : shown_) {
    for (const auto& [key, value] : metrics) {
      if (key == name) out += fmt::format("  {} {:.4f}", name, value);
    }
  }
  return out;
}

bool Progress::is_terminal(std::FILE* out) { return ::isatty(::fileno(out)) == 1; }

void Progress::step(const StepMetrics& m) {
  elapsed_s_ += m.step_time_s;
  const int64_t done = m.step - first_step_;
  const double eta = done > 0 ? elapsed_s_ / static_cast<double>(done) *
                                    static_cast<double>(total_ - m.step)
                              : 0.0;
  if (interactive_) {
    constexpr int kBar = 24;
    const int filled = total_ > 0 ? static_cast<int>(kBar * m.step / total_) : 0;
    const std::string bar = std::string(std::clamp(filled, 0, kBar), '#') +
                            std::string(kBar - std::clamp(filled, 0, kBar), '.');
    std::fprintf(out_, "\r[%s] step %lld/%lld  loss %.4f%s  lr %.2e  %.0f tok/s  ETA %s   ",
                 bar.c_str(), static_cast<long long>(m.step), static_cast<long long>(total_),
                 m.loss, shown_metrics(m.objective_metrics).c_str(), m.lr, m.tokens_per_s,
                 format_duration(eta).c_str());
    bar_open_ = true;
  } else {
    std::fprintf(out_,
                 "step %lld/%lld  loss %.6f%s  grad_norm %.4f  lr %.3e  tokens/s %.0f  "
                 "step_time %.3fs  comm_wait %.3fs  ETA %s\n",
                 static_cast<long long>(m.step), static_cast<long long>(total_), m.loss,
                 shown_metrics(m.objective_metrics).c_str(), m.grad_norm, m.lr, m.tokens_per_s,
                 m.step_time_s, m.comm_wait_s, format_duration(eta).c_str());
  }
  std::fflush(out_);
}

void Progress::end_bar_line() {
  if (bar_open_) std::fputc('\n', out_);
  bar_open_ = false;
}

void Progress::validation(const ValMetrics& m) {
  end_bar_line();
  // A validation without a loss (GRPO's, which scores generations) shows its metrics only.
  const std::string loss = std::isfinite(m.loss) ? fmt::format("  val_loss {:.6f}", m.loss) : std::string();
  std::fprintf(out_, "validation at step %lld%s%s  (%lld tokens)\n", static_cast<long long>(m.step), loss.c_str(),
               shown_metrics(m.objective_metrics).c_str(), static_cast<long long>(m.valid_tokens));
  std::fflush(out_);
}

void Progress::finish(const std::string& summary) {
  end_bar_line();
  std::fprintf(out_, "%s\n", summary.c_str());
  std::fflush(out_);
}

}  // namespace tessel::train
