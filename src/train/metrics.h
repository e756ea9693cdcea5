// Per-step training metrics (SPEC 6) and where they go: one JSON object per
// line in <log_dir>/metrics.jsonl (always, rank 0 only), so a run can be
// plotted or compared later without parsing the console output. Validation
// results go to the same file with "split": "val", so one file holds the
// whole run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "train/link_traffic.h"
#include "train/straggler.h"

namespace tessel::train {

struct StepMetrics {
  int64_t step = 0;             // 1-based optimizer step
  double loss = 0.0;            // mean over the global batch's valid tokens (+ coef * aux_loss, MoE)
  double aux_loss = 0.0;        // MoE load-balancing loss (StepResult::aux_loss); 0 for dense models
  double grad_norm = 0.0;       // before clipping
  double lr = 0.0;              // rate used by this step
  int64_t tokens = 0;           // tokens of the global batch (all dp ranks)
  int64_t valid_tokens = 0;     // tokens with a loss (response tokens)
  double tokens_per_s = 0.0;    // tokens / step_time_s
  // Rank 0's wall time from the step's data to its figures: the batch, the
  // forward, backward and update, and the step's own collectives (the
  // gather of every rank's figures at a rank-metrics step included); not a
  // checkpoint's save or a validation after it. A run's step times add up
  // to its training time but for writing the records.
  double step_time_s = 0.0;
  // Of step_time_s, what rank 0's training thread spent in collectives
  // (waiting for them or running them: dist/caller_wait_time.h) inside the
  // training step (the rank-metrics gather, which carries these figures, not
  // counted): the step's communication that compute did not hide.
  double comm_wait_s = 0.0;
  // All empty except at steps that gathered them (logger.rank_metrics_period):
  std::vector<int64_t> peak_rss_bytes;  // per world rank (VmHWM)
  // Per world rank, on a GPU only: the device allocator's high-water mark
  // (bytes given to tensors; its cache reserves more).
  std::vector<int64_t> peak_device_bytes;
  GroupBytes sent_bytes;                // per mesh group, summed over ranks (link_traffic.h)
  std::vector<double> comm_wait_s_per_rank;  // per world rank, as comm_wait_s above
  // At those steps: the rank (or node) the others waited for, if any (straggler.h).
  std::optional<Straggler> straggler;
  // The objective's own metrics (train/step_objective.h), "loss" first; the
  // ones beside the loss (DPO's accuracy, ...) are written as fields.
  std::vector<std::pair<std::string, double>> objective_metrics;
};

// What the OS measured once the model was loaded and sharded, before the
// first step ("split": "setup", the first record of a run).
struct SetupMetrics {
  std::vector<int64_t> rss_bytes;       // per world rank (VmRSS)
  std::vector<int64_t> peak_rss_bytes;  // per world rank (VmHWM): the load phase's peak
  int64_t shard_bytes = 0;              // rank 0's fp32 shards
};

// The largest of the per-rank values (0 for none): the rank that limits what fits.
int64_t max_over_ranks(const std::vector<int64_t>& per_rank);

struct ValMetrics {
  int64_t step = 0;  // optimizer steps done when validating
  double loss = 0.0;
  int64_t valid_tokens = 0;
  std::vector<std::pair<std::string, double>> objective_metrics;  // as StepMetrics'
};

// Appends to <dir>/metrics.jsonl (truncated when opened, unless `append` is
// set for a resumed run). Every record is flushed, so a crashed run keeps
// its metrics up to the last step.
class MetricsWriter {
 public:
  MetricsWriter(const std::filesystem::path& dir, bool append = false);
  void write(const StepMetrics& m);
  void write(const ValMetrics& m);
  void write(const SetupMetrics& m);
  // {"split": "run", "sent_bytes": ..., "inter_node_bytes": ..., "straggler":
  // ...}: the whole run's collective sends, summed over ranks, and the rank
  // the others waited for over the run (null: nobody; find_run_straggler).
  void write_run_totals(const GroupBytes& sent, const std::optional<Straggler>& straggler);
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  std::ofstream out_;
};

}  // namespace tessel::train
