#include "train/lr_schedule_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace tessel::train {

namespace {

constexpr const char* kPath = "policy.scheduler";

// "torch.optim.lr_scheduler.LinearLR" -> "LinearLR"
std::string short_name(const std::string& name) {
  const auto dot = name.rfind('.');
  return dot == std::string::npos ? name : name.substr(dot + 1);
}

struct SchedulerEntry {
  std::string name;  // short class name
  config::Config kwargs;
  std::string where;  // "policy.scheduler.0", for messages
};

double kwarg(const SchedulerEntry& e, const char* key, double fallback) {
  return e.kwargs.get_or<double>(key, fallback);
}

// Applies the decay part (the scheduler after the warmup, or the only one).
void apply_decay(const SchedulerEntry& e, double base_lr, optim::LrScheduleOptions& out) {
  if (e.name == "ConstantLR") {
    // ConstantLR multiplies by `factor` for total_iters steps, then runs at
    // base; the reference uses factor 1.0 (a plain constant).
    const double factor = kwarg(e, "factor", 1.0 / 3.0);
    if (std::abs(factor - 1.0) > 1e-12) {
      throw UsageError(fmt::format("{}: ConstantLR with factor {} is not supported (only "
                                   "factor 1.0, a constant rate); scale optimizer.kwargs.lr "
                                   "instead",
                                   e.where, factor));
    }
    out.decay = optim::LrDecay::Constant;
  } else if (e.name == "CosineAnnealingLR") {
    const auto t_max = e.kwargs.get_or<int64_t>("T_max", 0);
    if (t_max <= 0) throw UsageError(fmt::format("{}.kwargs.T_max must be > 0", e.where));
    out.decay = optim::LrDecay::Cosine;
    out.decay_steps = t_max;
    out.min_lr_ratio = base_lr > 0 ? kwarg(e, "eta_min", 0.0) / base_lr : 0.0;
  } else if (e.name == "LinearLR") {
    const double start = kwarg(e, "start_factor", 1.0 / 3.0);
    if (std::abs(start - 1.0) > 1e-12) {
      throw UsageError(fmt::format("{}: a LinearLR decay must start at factor 1.0, got "
                                   "start_factor {}",
                                   e.where, start));
    }
    out.decay = optim::LrDecay::Linear;
    out.decay_steps = e.kwargs.get_or<int64_t>("total_iters", 5);
    out.min_lr_ratio = kwarg(e, "end_factor", 1.0);
  } else {
    throw UsageError(fmt::format("{}: unsupported scheduler '{}'; supported: LinearLR, "
                                 "ConstantLR, CosineAnnealingLR",
                                 e.where, e.name));
  }
}

optim::LrScheduleOptions from_mapping(const config::Config& node, double base_lr) {
  optim::LrScheduleOptions out;
  out.base_lr = base_lr;
  const auto& known = lr_schedule_mapping_keys();
  for (const auto& key : node.keys()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      throw UsageError(fmt::format("unknown key {}.{}; known: {}", kPath, key, fmt::join(known, ", ")));
    }
  }
  out.warmup_steps = node.get_or<int64_t>("warmup_steps", 0);
  out.warmup_start_factor = node.get_or<double>("warmup_start_factor", out.warmup_start_factor);
  out.decay = optim::parse_lr_decay(node.get_or<std::string>("decay", "constant"));
  out.decay_steps = node.get_or<int64_t>("decay_steps", 0);
  out.min_lr_ratio = node.get_or<double>("min_lr_ratio", 0.0);
  return out;
}

}  // namespace

const std::vector<std::string>& lr_schedule_mapping_keys() {
  static const std::vector<std::string> keys = {"warmup_steps", "warmup_start_factor", "decay",
                                                "decay_steps", "min_lr_ratio"};
  return keys;
}

optim::LrScheduleOptions lr_schedule_from(const config::Config& scheduler, double base_lr) {
  optim::LrScheduleOptions out;
  out.base_lr = base_lr;
  if (scheduler.is_null()) {
    optim::validate(out);
    return out;
  }
  if (scheduler.is_map()) {
    out = from_mapping(scheduler, base_lr);
    optim::validate(out);
    return out;
  }
  if (!scheduler.is_list()) {
    throw UsageError(fmt::format("{} must be null, a mapping or the reference's list of "
                                 "schedulers, got {}",
                                 kPath, scheduler.to_flow()));
  }
  std::vector<SchedulerEntry> entries;
  std::optional<std::vector<int64_t>> milestones;
  for (size_t i = 0; i < scheduler.items().size(); ++i) {
    const auto& item = scheduler.items()[i];
    const std::string where = fmt::format("{}.{}", kPath, i);
    if (!item.is_map()) throw UsageError(fmt::format("{} must be a mapping", where));
    if (item.has("milestones")) {
      milestones = item.get<std::vector<int64_t>>("milestones");
      continue;
    }
    SchedulerEntry e;
    e.name = short_name(item.get<std::string>("name"));
    e.kwargs = item.find("kwargs") ? item.sub("kwargs") : config::Config::map();
    e.where = where;
    entries.push_back(std::move(e));
  }
  if (entries.empty()) throw UsageError(fmt::format("{} lists no scheduler", kPath));
  if (entries.size() == 1) {
    const auto& only = entries.front();
    if (only.name == "LinearLR" && kwarg(only, "end_factor", 1.0) == 1.0) {
      // A warmup alone: ramps to the base rate, then stays there.
      out.warmup_steps = only.kwargs.get_or<int64_t>("total_iters", 5);
      out.warmup_start_factor = kwarg(only, "start_factor", 1.0 / 3.0);
    } else {
      apply_decay(only, base_lr, out);
    }
    optim::validate(out);
    return out;
  }
  if (entries.size() != 2 || !milestones || milestones->size() != 1) {
    throw UsageError(fmt::format("{}: tessel supports a warmup scheduler, then one decay "
                                 "scheduler, switched at one milestone ([LinearLR, X, "
                                 "{{milestones: [N]}}]); got {} schedulers and {} milestones",
                                 kPath, entries.size(), milestones ? milestones->size() : 0));
  }
  const auto& warm = entries[0];
  const int64_t milestone = milestones->front();
  if (warm.name != "LinearLR") {
    throw UsageError(fmt::format("{}: the first scheduler must be the LinearLR warmup, got {}",
                                 warm.where, warm.name));
  }
  const int64_t total = warm.kwargs.get_or<int64_t>("total_iters", 5);
  const double end = kwarg(warm, "end_factor", 1.0);
  if (total != milestone || std::abs(end - 1.0) > 1e-12) {
    throw UsageError(fmt::format("{}: the warmup must reach end_factor 1.0 exactly at the "
                                 "milestone (total_iters {} == milestones [{}], end_factor {}); "
                                 "set total_iters to the milestone and end_factor to 1.0",
                                 warm.where, total, milestone, end));
  }
  out.warmup_steps = milestone;
  out.warmup_start_factor = kwarg(warm, "start_factor", 1.0 / 3.0);
  apply_decay(entries[1], base_lr, out);
  optim::validate(out);
  return out;
}

}  // namespace tessel::train
