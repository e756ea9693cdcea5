// Which rank (or node) the others wait for. In a synchronous step every
// collective finishes when its slowest member arrives, so a rank that
// computes (or sends) slowest waits least in collectives while everyone
// else waits for it: per-rank comm_wait_s (metrics.h) names it. A balanced
// run names nobody.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace tessel::train {

struct Straggler {
  std::vector<int> ranks;  // the ranks the others wait for, least wait first
  // Their node's name where they are all on one node, else empty; whole_node
  // when every rank of that node is among them (the node is slow, not a rank).
  std::string node;
  bool whole_node = false;
  double wait_s = 0.0;                // ranks.front()'s time in collectives per step
  double others_median_wait_s = 0.0;  // the median over the ranks not named, per step
  double step_time_s = 0.0;           // per step, as the waits were measured
};

// A rank is named when the median wait of all the other ranks exceeds its own
// by at least kStragglerMinGapS and by at least kStragglerMinGapOfStep of the
// step, and its own wait is at most kStragglerMaxWaitShare of that median:
// the absolute margin ignores milliseconds that nobody would chase, the
// share of the step keeps noise in a long step from counting, and the ratio
// says the others wait notably more than it, not merely a little.
//
// Several ranks named that are half the job or more are named only where
// they are one node's ranks (a slow node): otherwise the job's ranks are
// taking turns, not waiting on a few. Ranks that share cores run by halves
// while the other half waits for them (measured: 4 ranks on 2 cores with no
// rank slowed, HSDP 2x2: at single steps one replicate pair waits 0.1-0.16 s,
// up to 30% of the step, more than the other, which pair changing between
// steps; over 7 steps up to 14% in 30 runs, and 19% in a CI run that named
// ranks 3, 2); which half the scheduler put behind is nothing to act on.
inline constexpr double kStragglerMinGapS = 0.05;
inline constexpr double kStragglerMinGapOfStep = 0.10;
inline constexpr double kStragglerMaxWaitShare = 0.5;

// wait_s[r]: world rank r's time in collectives per step; node_of_rank[r]:
// its node's name (empty: all on one unnamed node). Needs 2 or more ranks.
std::optional<Straggler> find_straggler(const std::vector<double>& wait_s, double step_time_s,
                                        const std::vector<std::string>& node_of_rank);

// The same over a run: waits_per_step[i] holds every rank's waits at one step
// that gathered them (logger.rank_metrics_period), step_time_s[i] its time;
// averaged per step. The run's first gathered step is left out when later
// ones exist (it carries one-off start-up imbalance: lazy allocation, the
// first data loads).
std::optional<Straggler> find_run_straggler(const std::vector<std::vector<double>>& waits_per_step,
                                            const std::vector<double>& step_time_s,
                                            const std::vector<std::string>& node_of_rank);

// "rank 3 on node1 — the others waited 1.20 s per step on it (it waited
// 0.05 s)", or for a whole node "node1 (ranks 2, 3) — ...".
std::string describe(const Straggler& s);

}  // namespace tessel::train
