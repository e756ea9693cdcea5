#include "train/trainer.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "device/backend.h"
#include "dist/caller_wait_time.h"
#include "dist/communicator_base.h"
#include "io/atomic_file.h"
#include "optim/adamw.h"
#include "optim/lr_schedule.h"
#include "train/checkpoint.h"
#include "train/hf_export.h"
#include "train/model_files.h"
#include "train/loss_curve_svg.h"
#include "train/link_traffic.h"
#include "config/parallelism_config.h"
#include "train/memory.h"
#include "train/profiled_step.h"
#include "train/progress.h"
#include "train/resume_point.h"
#include "train/sft_recipe.h"
#include "train/straggler.h"
#include "train/tensorboard_writer.h"
#include "train/train_step.h"

namespace tessel::train {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// What a checkpoint of step `m.step` records for checkpointing.metric_name
// (checkpoint_metric_names()). As in the reference, only a validation run at
// this very step counts: an earlier one measured other weights.
std::map<std::string, double> checkpoint_metrics(const StepMetrics& m,
                                                 const std::vector<ValMetrics>& validations) {
  std::map<std::string, double> out = {{"train:loss", m.loss}, {"train:grad_norm", m.grad_norm}};
  if (!validations.empty() && validations.back().step == m.step) {
    out["val:val_loss"] = validations.back().loss;
    for (const auto& [name, value] : validations.back().objective_metrics) {
      if (name != "loss") out["val:" + name] = value;
    }
  }
  return out;
}

std::string human_bytes(int64_t b) {
  return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1024.0 * 1024.0));
}

// Rank 0's `value`, on every rank of `world`.
bool broadcast_flag(dist::Communicator& world, bool value) {
  auto flag = at::tensor({static_cast<int64_t>(value ? 1 : 0)}, at::kLong);
  world.broadcast(flag, 0);
  return flag.item<int64_t>() == 1;
}

// Each world rank's node name (ranks with one processor name share a node:
// dist/node_map.h); empty where the world communicator has no node map.
std::vector<std::string> node_of_each_rank(const dist::Communicator& world) {
  const auto* base = dynamic_cast<const dist::CommunicatorBase*>(&world);
  if (base == nullptr || !base->node_map() || base->node_map()->world_size() != world.size()) return {};
  const dist::NodeMap& nodes = *base->node_map();
  std::vector<std::string> names;
  for (int r = 0; r < world.size(); ++r) names.push_back(nodes.names()[static_cast<std::size_t>(nodes.node_of(r))]);
  return names;
}

}  // namespace

TrainResult run_training(const config::Config& config, const TrainOptions& o, const dist::DeviceMesh& mesh,
                         Recipe& recipe, const RunOptions& run) {
  const auto job_start = Clock::now();  // checkpointing.checkpoint_must_save_by counts from here
  const bool rank0 = mesh.world()->rank() == 0;
  const bool speak = rank0 && !run.quiet;

  // The model, built sharded: no rank ever holds it whole (model_setup.h).
  const config::ParallelismConfig parallelism = config::parallelism_from(config);
  ShardedModel sharded = setup_model(o, mesh, parallelism);
  const MemoryReport after_setup = memory_report(*mesh.world());
  recipe.setup(sharded, mesh);

  const int64_t total_steps = std::min(o.max_num_steps, o.max_num_epochs * recipe.steps_per_epoch());
  const int64_t num_params = global_parameter_count(sharded);
  optim::AdamW optimizer(sharded.optimizer_params(), o.adamw);
  std::vector<StepMetrics> steps;
  std::vector<ValMetrics> validations;

  if (rank0) {
    log::info("{}: model {} ({} parameters)", recipe.name(), o.model_name, num_params);
    log::info("mesh {}; dp size {}", mesh.layout().describe(), mesh.layout().dp_size());
    log::info("{}", setup_memory_line(sharded, after_setup));
    for (const auto& line : recipe.describe(mesh)) log::info("{}", line);
    log::info("training {} steps", total_steps);
  }
  // Resume from the latest complete checkpoint, as the reference does when
  // checkpointing is enabled and its directory already holds one (or from
  // checkpointing.resume_from); one step for all ranks, its files checked.
  int64_t start_step = 0;
  if (const auto from = resume_point(o.checkpoint, *mesh.world())) {
    const CheckpointInfo info = load_checkpoint(*from, sharded, &optimizer, recipe.checkpoint_shards());
    recipe.load_data_state(info.sampler);
    start_step = info.step;
    if (rank0) log::info("resumed from {} (step {})", from->string(), start_step);
  }
  // AdamW's moments now rather than at the first step's end: made after the
  // first step they take the pages its activations left (the allocator keeps
  // freed pages, cli/main.cpp), and the second step maps its activations
  // anew: peak RSS 4-19% higher (Qwen2.5-0.5B at FSDP 4: 3.77 against
  // 3.39 GiB per rank; docs/bench/memory.md). A resumed run's came from the checkpoint.
  optimizer.allocate_state();

  std::unique_ptr<MetricsWriter> metrics;
  std::unique_ptr<TensorBoardWriter> tensorboard;
  std::unique_ptr<Progress> progress;
  if (rank0 && run.write_logs) {
    metrics = std::make_unique<MetricsWriter>(o.log_dir, /*append=*/start_step > 0);
    metrics->write(SetupMetrics{after_setup.rss, after_setup.peak_rss, sharded.local_param_bytes()});
    io::write_file_atomically(fs::path(o.log_dir) / "config.yaml", config.to_yaml());
    if (o.tensorboard) {
      tensorboard = std::make_unique<TensorBoardWriter>(fs::path(o.log_dir) / "tensorboard");
    }
  }
  if (speak) {
    const bool interactive = run.interactive.value_or(Progress::is_terminal(run.progress_out));
    progress = std::make_unique<Progress>(run.progress_out, total_steps, interactive, start_step,
                                          recipe.shown_metrics());
  }

  auto validate = [&](int64_t step) {
    const EvalResult r = recipe.validate(sharded, mesh);
    ValMetrics v{step, r.loss, r.valid_tokens, r.metrics};
    validations.push_back(v);
    if (metrics) metrics->write(v);
    if (tensorboard) tensorboard->write(v);
    if (progress) progress->validation(v);
  };

  const KeepPolicy keep{o.checkpoint.keep_top_k, o.checkpoint.metric_name,
                        o.checkpoint.higher_is_better};
  bool warned_no_metric = false;
  const bool validates = recipe.validates();
  if (validates && o.val_at_start) validate(start_step);
  const auto run_start = Clock::now();
  const std::vector<std::string> node_names = node_of_each_rank(*mesh.world());
  int64_t run_tokens = 0;
  const std::optional<int64_t> profile_step = profile_step_from_env();
  if (profile_step && mesh.device().is_cpu())
    log::warn("TESSEL_PROFILE_STEP={} marks a step for a GPU profiler; this run computes on the CPU", *profile_step);
  for (int64_t step = start_step; step < total_steps; ++step) {
    const bool profiled = profile_step == step + 1 && device::mark_profiler_range(mesh.device(), true);
    const auto t0 = Clock::now();
    const GroupBytes sent_before = sent_bytes(mesh);
    const auto batches = recipe.next_step(sharded, mesh, step);
    const double lr = optim::lr_at(o.lr_schedule, step);
    const double waited_before = dist::caller_wait_seconds();
    const StepResult r = train_step(sharded, optimizer, mesh, batches, recipe.objective(), lr, o.max_grad_norm);
    if (profiled) device::mark_profiler_range(mesh.device(), false);
    const double waited = dist::caller_wait_seconds() - waited_before;
    const GroupBytes sent = difference(sent_bytes(mesh), sent_before);  // the step's own collectives

    StepMetrics m;
    m.step = step + 1;
    m.loss = r.loss;
    m.aux_loss = r.aux_loss;
    m.grad_norm = r.grad_norm;
    m.lr = lr;
    m.tokens = r.tokens;
    m.valid_tokens = r.valid_tokens;
    m.comm_wait_s = waited;
    m.objective_metrics = r.metrics;
    for (auto& metric : recipe.step_metrics()) m.objective_metrics.push_back(std::move(metric));
    // checkpoint_must_save_by: once the time is up the run saves and ends
    // after this step. Rank 0's clock decides for every rank (clocks and
    // step ends differ slightly; all ranks must stop at the same step).
    const bool time_is_up = o.checkpoint.must_save_by && step + 1 < total_steps &&
                            broadcast_flag(*mesh.world(), Clock::now() - job_start >= *o.checkpoint.must_save_by);
    const bool last = step + 1 == total_steps || time_is_up;
    // Every rank's figures need a collective: only every rank_metrics_period
    // steps, and at a run's first and last step (the final peak counts every
    // step: VmHWM only grows). Every rank decides alike from the step number.
    if (step == start_step || last || (step + 1) % o.rank_metrics_period == 0) {
      // One all-gather carries every rank's peak RSS, its step's time in
      // collectives (microseconds), its device's peak memory and its step's
      // sends.
      std::vector<int64_t> mine = flatten(sent);
      mine.insert(mine.begin(), {peak_rss_bytes(), static_cast<int64_t>(std::llround(waited * 1e6)),
                                 peak_device_bytes(mesh.device())});
      const std::vector<int64_t> all = gather_values(*mesh.world(), mine);
      std::vector<int64_t> traffic;
      for (std::size_t r = 0; r < all.size(); r += mine.size()) {
        m.peak_rss_bytes.push_back(all[r]);
        m.comm_wait_s_per_rank.push_back(static_cast<double>(all[r + 1]) / 1e6);
        if (device_peak_measured(mesh.device())) m.peak_device_bytes.push_back(all[r + 2]);
        traffic.insert(traffic.end(), all.begin() + static_cast<std::ptrdiff_t>(r) + 3,
                       all.begin() + static_cast<std::ptrdiff_t>(r + mine.size()));
      }
      m.sent_bytes = sum_over_ranks(sent, traffic);
    }
    // The step's time runs to here: the collectives above are the step's too
    // (the rank-metrics gather waits for the slowest rank, a wait the next
    // step would otherwise begin with), and without them a run's step times
    // add up to less than its wall time (on a slow link up to 4% less per step
    // with rank_metrics_period 1, docs/bench/cluster.md).
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    m.step_time_s = seconds;
    m.tokens_per_s = seconds > 0 ? static_cast<double>(r.tokens) / seconds : 0.0;
    if (!m.comm_wait_s_per_rank.empty()) m.straggler = find_straggler(m.comm_wait_s_per_rank, m.step_time_s, node_names);
    run_tokens += r.tokens;
    steps.push_back(m);
    if (metrics) metrics->write(m);
    if (tensorboard) tensorboard->write(m);
    if (progress) progress->step(m);
    if (!std::isfinite(r.loss)) {
      throw Error(fmt::format("loss is {} at step {}: training diverged; lower "
                              "policy.optimizer.kwargs.lr or set policy.max_grad_norm",
                              r.loss, m.step));
    }
    // val_at_end validates before the last save, so that checkpoint records its val loss.
    if (validates && ((o.val_period > 0 && (step + 1) % o.val_period == 0) || (last && o.val_at_end))) {
      validate(step + 1);
    }
    if (o.checkpoint.enabled &&
        ((o.checkpoint.save_period > 0 && (step + 1) % o.checkpoint.save_period == 0) || last)) {
      const CheckpointInfo info{step + 1, recipe.data_state(), checkpoint_metrics(m, validations)};
      if (keep.top_k > 0 && !keep.metric_name.empty() &&
          info.metrics.count(keep.metric_name) == 0 && !warned_no_metric && rank0) {
        log::warn(
            "checkpoint of step {} has no {} (no validation at that step): keep_top_k ranks it "
            "below the checkpoints that have one; align {}.val_period with "
            "checkpointing.save_period",
            info.step, keep.metric_name, recipe.name());
        warned_no_metric = true;
      }
      const ShardSets* extra = recipe.checkpoint_shards();
      save_checkpoint(o.checkpoint.dir, info, sharded, o.checkpoint.save_optimizer ? &optimizer : nullptr, mesh,
                      config, keep, extra ? *extra : ShardSets{});
      if (o.checkpoint.save_consolidated) {
        const fs::path hf = checkpoint_step_dir(o.checkpoint.dir, info.step) / kConsolidatedDirName;
        HfExportOptions export_options;
        export_options.dtype = o.checkpoint.consolidated_dtype;
        export_options.max_shard_bytes = o.checkpoint.consolidated_max_shard_bytes;
        export_sharded_model(sharded, mesh, hf, export_options, find_model_files(model_file_sources(config)));
        if (rank0) log::info("wrote {} (the model as a Hugging Face directory)", hf.string());
      }
    }
    if (time_is_up) {
      if (rank0) {
        log::warn("checkpointing.checkpoint_must_save_by ({} s) reached after step {} of {}: {}",
                  o.checkpoint.must_save_by->count(), step + 1, total_steps,
                  o.checkpoint.enabled ? fmt::format("saved step_{} in {}; run the same command again to resume",
                                                     step + 1, o.checkpoint.dir)
                                       : std::string("ending without a checkpoint (checkpointing.enabled=false)"));
      }
      break;
    }
  }
  // The last step's updated parts are still on their way (split over replicas).
  sharded.root.wait_for_replica_parts();
  // A resumed run that had already finished still validates at the end.
  if (validates && o.val_at_end && start_step >= total_steps) validate(total_steps);
  const double total_s = std::chrono::duration<double>(Clock::now() - run_start).count();
  // The rank the others waited for over the run, from the steps that
  // gathered every rank's waits (rank 0 writes and prints it).
  std::vector<std::vector<double>> gathered_waits;
  std::vector<double> gathered_step_times;
  for (const auto& s : steps) {
    if (s.comm_wait_s_per_rank.empty()) continue;
    gathered_waits.push_back(s.comm_wait_s_per_rank);
    gathered_step_times.push_back(s.step_time_s);
  }
  const std::optional<Straggler> run_straggler =
      find_run_straggler(gathered_waits, gathered_step_times, node_names);
  {
    // Everything the mesh's collectives sent since it was made (setup and
    // validation too): what the links' own counters should show for the run.
    // Collective: every rank joins, the metrics writer (rank 0) records it.
    const GroupBytes mine = sent_bytes(mesh);
    const GroupBytes all = sum_over_ranks(mine, gather_values(*mesh.world(), flatten(mine)));
    if (metrics) metrics->write_run_totals(all, run_straggler);
  }

  if (rank0 && run.write_logs) {
    LossCurve curve;
    curve.title = fmt::format("{} {} on {} ({})", recipe.name(), o.model_name, o.train_data.name,
                              mesh.layout().describe());
    for (const auto& s : steps) curve.train.emplace_back(s.step, s.loss);
    for (const auto& v : validations) {
      if (std::isfinite(v.loss)) curve.val.emplace_back(v.step, v.loss);
    }
    write_loss_curve_svg(curve, fs::path(o.log_dir) / "loss_curve.svg");
  }
  if (progress && !steps.empty()) {
    const auto& first = steps.front();
    const auto& lastm = steps.back();
    int64_t peak = 0;
    for (auto b : lastm.peak_rss_bytes) peak = std::max(peak, b);
    double step_s = 0.0, waited_s = 0.0;
    for (const auto& s : steps) {
      step_s += s.step_time_s;
      waited_s += s.comm_wait_s;
    }
    const std::string waiting =
        mesh.world()->size() > 1 && step_s > 0
            ? fmt::format(", {:.1f}% of step time waiting on collectives (rank 0)", 100.0 * waited_s / step_s)
            : std::string();
    // RSS counts memory the node's ranks share in every one of them: say how
    // much of the peak that is when parameters are node-shared.
    const std::string shared =
        parallelism.node_shared_params && mesh.world()->size() > 1
            ? fmt::format(" (RSS; {} of it shared by the node's ranks, rank 0)",
                          human_bytes(shared_rss_bytes()))
        : !lastm.peak_device_bytes.empty()
            ? fmt::format(" (RSS; {}{} at most in tensors)",
                          mesh.device().is_cpu() ? "" : "on " + mesh.device().str() + ": ",
                          human_bytes(max_over_ranks(lastm.peak_device_bytes)))
            : std::string();
    progress->finish(fmt::format(
        "done: {} steps in {:.1f}s, loss {:.4f} -> {:.4f}, {:.0f} tokens/s{}, peak memory {} per "
        "rank{}{}{}",
        steps.size(), total_s, first.loss, lastm.loss,
        total_s > 0 ? static_cast<double>(run_tokens) / total_s : 0.0, waiting, human_bytes(peak), shared,
        run_straggler ? "; straggler: " + describe(*run_straggler) : std::string(),
        run.write_logs ? fmt::format("; logs in {}", o.log_dir) : std::string()));
  }
  return TrainResult{std::move(steps), std::move(validations), total_steps, std::move(sharded)};
}

TrainResult train(const config::Config& config, const dist::DeviceMesh& mesh, const RunOptions& run) {
  const TrainOptions o = train_options_from(config);
  SftRecipe recipe(o);
  return run_training(config, o, mesh, recipe, run);
}

}  // namespace tessel::train
