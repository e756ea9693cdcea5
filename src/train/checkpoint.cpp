#include "train/checkpoint.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string_view>

#include "core/error.h"
#include "core/log.h"
#include "fsdp/state_dict.h"
#include "io/atomic_file.h"
#include "io/confined_file.h"
#include "io/safetensors_writer.h"
#include "models/model_config.h"
#include "tensor/box_map.h"
#include "train/checkpoint_manifest.h"
#include "train/checkpoint_metadata.h"
#include "train/model_files.h"
#include "train/rank_files.h"
#include "train/shard_loading.h"

namespace tessel::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string step_name(int64_t step) { return fmt::format("step_{}", step); }
const std::regex& step_pattern() {
  static const std::regex pattern("step_([0-9]+)");
  return pattern;
}

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("cannot read {}", path.string()));
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// name -> index of the parameter in the optimizer's list (model->parameters()
// order, which named_parameters() shares).
std::map<std::string, size_t> param_index(models::CausalLM& model) {
  std::map<std::string, size_t> out;
  size_t i = 0;
  for (const auto& item : model.named_parameters()) out[item.key()] = i++;
  return out;
}

// The value `metric` has in a step's metadata.json, if it was recorded.
std::optional<double> recorded_metric(const fs::path& step_dir, const std::string& metric) {
  if (metric.empty()) return std::nullopt;
  // A metadata.json that links out of its step is not read (io/confined_file.h).
  if (!io::why_outside(step_dir, "metadata.json", step_dir).empty()) return std::nullopt;
  std::ifstream in(step_dir / "metadata.json");
  const json meta = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object() || !meta.contains("metrics")) return std::nullopt;
  const json& metrics = meta.at("metrics");
  const auto it = metrics.find(metric);
  if (it == metrics.end() || !it->is_number()) return std::nullopt;  // NaN is stored as null
  return it->get<double>();
}

// As the reference: the `keep.top_k` best steps by the metric survive, and the
// newest step always does (a run resumes from it). A step without the metric
// (metric_name null, or not measured at that step, e.g. no validation there)
// ranks after every step with one; among those, and on equal values, the more
// recent wins, so with no metric at all this keeps the most recent steps.
void prune(const fs::path& dir, const KeepPolicy& keep) {
  if (keep.top_k <= 0) return;
  struct Step {
    int64_t step;
    fs::path path;
    std::optional<double> metric;
  };
  std::vector<Step> steps;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    // Only complete checkpoints count: a directory without metadata.json is
    // not one and must not push a real checkpoint out.
    if (e.is_directory() && std::regex_match(name, m, step_pattern()) &&
        fs::is_regular_file(e.path() / "metadata.json")) {
      steps.push_back({std::stoll(m[1]), e.path(), recorded_metric(e.path(), keep.metric_name)});
    }
  }
  if (steps.empty()) return;
  const int64_t newest =
      std::max_element(steps.begin(), steps.end(), [](const Step& a, const Step& b) {
        return a.step < b.step;
      })->step;
  std::sort(steps.begin(), steps.end(), [&](const Step& a, const Step& b) {
    if (a.metric.has_value() != b.metric.has_value()) return a.metric.has_value();
    if (a.metric && *a.metric != *b.metric) {
      return keep.higher_is_better ? *a.metric > *b.metric : *a.metric < *b.metric;
    }
    return a.step > b.step;
  });
  for (size_t i = static_cast<size_t>(keep.top_k); i < steps.size(); ++i) {
    if (steps[i].step != newest) fs::remove_all(steps[i].path);
  }
}


// Test-only fault injection (tests/train/checkpoint_crash_test.cpp,
// scripts/trials/fault_trials.sh):
// TESSEL_TEST_CRASH_IN_SAVE=<step>[:<rank>[:<point>|:throw]] makes rank <rank>
// (default 0) SIGKILL itself while it saves step <step>, at <point>:
//   before_shard     any rank, before writing its shard (.tmp holds others' or none)
//   after_shard      any rank, its shard written and fsync'ed
//   before_metadata  rank 0, every shard durable, no commit marker yet
//   before_rename    rank 0, the .tmp complete with metadata.json, not yet step_<N>
//   after_rename     rank 0, step_<N> visible, older steps not yet pruned
// Without a point: rank 0 before_rename, any other rank after_shard. A real
// kill, not an exception, so nothing is unwound or flushed: what is on disk
// is what a crash leaves. With ":throw" the rank throws tessel::Error at its
// default point instead, as a failed write would, while the other ranks wait
// for it in the save's collectives. Unset in normal runs.
void crash_here_if_asked(int64_t step, int rank, std::string_view point) {
  const char* spec = std::getenv("TESSEL_TEST_CRASH_IN_SAVE");
  if (spec == nullptr || *spec == '\0') return;
  long long want_step = -1;
  int want_rank = 0;
  char how[32] = {};
  if (std::sscanf(spec, "%lld:%d:%31s", &want_step, &want_rank, how) < 1) return;
  static const std::set<std::string_view> kPoints = {"before_shard", "after_shard", "before_metadata",
                                                     "before_rename", "after_rename"};
  const std::string_view asked(how);
  if (!asked.empty() && asked != "throw" && !kPoints.contains(asked)) {
    throw Error(fmt::format("TESSEL_TEST_CRASH_IN_SAVE={}: '{}' is neither a crash point ({}) nor 'throw'", spec,
                            asked, fmt::join(kPoints, ", ")));
  }
  if (want_step != step || want_rank != rank) return;
  const std::string_view default_point = rank == 0 ? "before_rename" : "after_shard";
  const bool throw_instead = asked == "throw";
  if (point != (asked.empty() || throw_instead ? default_point : asked)) return;
  if (throw_instead) {
    throw Error(fmt::format("injected by TESSEL_TEST_CRASH_IN_SAVE: the checkpoint of step {} "
                            "failed on rank {}",
                            step, rank));
  }
  ::raise(SIGKILL);
}

// Removes what interrupted saves left in `dir` (.step_<N>.tmp being written,
// .step_<N>.old being replaced). Only one run writes a checkpoint directory,
// so anything of that shape is dead.
void remove_leftovers(const fs::path& dir) {
  static const std::regex leftover(R"(\.step_[0-9]+\.(tmp|old))");
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && std::regex_match(e.path().filename().string(), leftover)) fs::remove_all(e.path());
  }
}

}  // namespace

void save_checkpoint(const fs::path& dir, const CheckpointInfo& info, ShardedModel& model,
                     const optim::AdamW* optimizer, const dist::DeviceMesh& mesh,
                     const config::Config& run_config, const KeepPolicy& keep, const ShardSets& extra) {
  const auto& world = mesh.world();
  const int rank = world->rank();
  const fs::path tmp = dir / fmt::format(".{}.tmp", step_name(info.step));
  const fs::path final_dir = dir / step_name(info.step);
  if (rank == 0) {
    fs::create_directories(dir);
    remove_leftovers(dir);
    fs::create_directories(tmp);
  }
  world->barrier();

  crash_here_if_asked(info.step, rank, "before_shard");
  // Split over replicas, the last step's updated parts may still be crossing
  // into the shards; and the optimizer state is gathered per parameter from
  // every replica's part (a collective: every rank, writer or not).
  model.root.wait_for_replica_parts();
  const std::vector<optim::AdamWParamState> states =
      optimizer != nullptr ? model.optimizer_state_per_param(*optimizer) : std::vector<optim::AdamWParamState>{};
  const auto index = param_index(*model.model);
  // Each element is written once (writes_its_elements).
  io::NamedTensors tensors;
  json offsets = json::object();
  json shapes = json::object();
  json tp_sharded = json::object();
  for (auto& [name, sp] : fsdp::sharded_state_dict(*model.model)) {
    shapes[name] = model.global_shape(name, sp.spec.global_shape());
    if (model.tp_sharded(name)) {
      const auto& tp = model.tp_params.at(name);
      tp_sharded[name] = {{"dim", tp.spec.placements().at(0).layout.normalized(tp.spec.global_shape().size()).dim()},
                          {"packed_parts", tp.packed_parts}};
    }
    if (!writes_its_elements(model, mesh, name)) continue;
    offsets[name] = sp.dim0_offset;
    tensors.emplace_back("model/" + name, sp.local.detach().contiguous());
    if (optimizer != nullptr) {
      const auto& st = states.at(index.at(name));
      if (st.exp_avg.defined()) {
        tensors.emplace_back("exp_avg/" + name, st.exp_avg.contiguous());
        tensors.emplace_back("exp_avg_sq/" + name, st.exp_avg_sq.contiguous());
      }
    }
    for (const auto& [kind, set] : extra) tensors.emplace_back(kind + "/" + name, set.at(name).detach().contiguous());
  }
  // The other ep ranks' experts: metadata.json names every parameter of the
  // model, so a load on any ep size (or `tessel convert`) finds them all.
  for (const auto& [name, shape] : model.other_ranks_params) shapes[name] = shape;
  const std::string rank_file = fmt::format("rank_{}.safetensors", rank);
  const io::FileDigest digest =
      io::save_safetensors(tmp / rank_file, tensors,
                           {{"dim0_offsets", offsets.dump()}, {"tp_rank", std::to_string(model.tp_group->rank())}});
  crash_here_if_asked(info.step, rank, "after_shard");
  // Every rank's file is on disk (fsync'ed by the writer) once this returns:
  // rank 0 learns what each wrote, for the manifest. [rank] = {bytes, hash}
  const at::Tensor mine = at::tensor({static_cast<int64_t>(digest.bytes),
                                      static_cast<int64_t>(digest.xxh64)}, at::kLong);
  const at::Tensor all = at::empty({world->size() * 2}, at::kLong);
  world->all_gather_into(all, mine);

  if (rank == 0) {
    CheckpointManifest files;
    const auto* digests = all.data_ptr<int64_t>();
    for (int r = 0; r < world->size(); ++r) {
      files[fmt::format("rank_{}.safetensors", r)] = {static_cast<uint64_t>(digests[2 * r]),
                                                      static_cast<uint64_t>(digests[2 * r + 1])};
    }
    files["config.json"] =
        io::write_file_atomically(tmp / "config.json", models::to_config_json(model.model->config()));
    files["config.yaml"] = io::write_file_atomically(tmp / "config.yaml", run_config.to_yaml());
    // The tokenizer and generation files of the run's model travel with the
    // checkpoint (train/model_files.h).
    const ModelFileSources sources = model_file_sources(run_config);
    json carried = json::array();
    for (auto& [name, digest] : copy_model_files(find_model_files(sources), tmp)) {
      files[name] = digest;
      carried.push_back(name);
    }
    json meta;
    meta["format"] = kCheckpointFormat;
    meta["step"] = info.step;
    meta["world_size"] = world->size();
    meta["mesh"] = mesh.layout().describe();
    meta["optimizer_step"] = optimizer ? optimizer->step_count() : 0;
    meta["has_optimizer"] = optimizer != nullptr && optimizer->step_count() > 0;
    json kinds = json::array();
    for (const auto& [kind, set] : extra) kinds.push_back(kind);
    meta["shard_sets"] = kinds;
    meta["sampler"] = json::parse(info.sampler.to_json());
    meta["metrics"] = info.metrics;
    meta["shapes"] = shapes;
    meta["tp_size"] = model.tp_group->size();
    meta["tp_sharded"] = tp_sharded;
    meta["model_files"] = {{"model_dir", sources.model_dir}, {"tokenizer_dir", sources.tokenizer_dir}, {"names", carried}};
    meta["files"] = json::parse(manifest_to_json(files));
    // The commit marker, last: a step directory holding metadata.json holds
    // every file it lists, durably.
    crash_here_if_asked(info.step, rank, "before_metadata");
    io::write_file_atomically(tmp / "metadata.json", meta.dump(2));
    crash_here_if_asked(info.step, rank, "before_rename");
    // Saving a step that already exists (a rerun): move the old copy aside
    // with one rename rather than deleting it first, so the window in which
    // neither copy is step_<N> is two renames, not a recursive delete.
    const fs::path old = dir / fmt::format(".{}.old", step_name(info.step));
    if (fs::exists(final_dir)) fs::rename(final_dir, old);
    fs::rename(tmp, final_dir);
    io::sync_directory(dir);  // the rename survives a power loss
    crash_here_if_asked(info.step, rank, "after_rename");
    fs::remove_all(old);
    prune(dir, keep);
  }
  world->barrier();
}

bool writes_its_elements(const ShardedModel& model, const dist::DeviceMesh& mesh, const std::string& name) {
  // The replicas of HSDP (dp_replicate > 0) and the tp ranks > 0 of a
  // parameter tp does not split hold copies. An expert under expert
  // parallelism has no copies: its ep_shard group spans dp_replicate, so
  // every rank holding it writes its own rows.
  if (model.expert_params.contains(name)) return true;
  if (mesh.coordinate("dp_replicate") != 0) return false;
  return model.tp_sharded(name) || model.tp_group->rank() == 0;
}

CheckpointMetadata read_checkpoint_metadata(const fs::path& step_dir) {
  const fs::path path =
      io::confined_file(step_dir, "metadata.json", fmt::format("checkpoint {}", step_dir.string()));
  return parse_checkpoint_metadata(read_text(path), path.string());
}

fs::path resolve_checkpoint(const fs::path& ckpt) {
  if (fs::is_regular_file(ckpt / "metadata.json")) return ckpt;
  if (auto latest = latest_checkpoint(ckpt)) return *latest;
  throw UsageError(fmt::format("{} is not a tessel checkpoint (no metadata.json, and no step_<N> "
                               "directory inside)",
                               ckpt.string()));
}

fs::path checkpoint_step_dir(const fs::path& dir, int64_t step) { return dir / step_name(step); }

int64_t checkpoint_step(const fs::path& step_dir) {
  std::smatch m;
  const std::string name = step_dir.filename().string();
  if (!std::regex_match(name, m, step_pattern())) {
    throw Error(fmt::format("{} is not a step_<N> checkpoint directory", step_dir.string()));
  }
  return std::stoll(m[1]);
}

std::optional<fs::path> latest_checkpoint(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  std::optional<std::pair<int64_t, fs::path>> best;
  for (const auto& e : fs::directory_iterator(dir)) {
    std::smatch m;
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || !std::regex_match(name, m, step_pattern())) continue;
    if (!fs::is_regular_file(e.path() / "metadata.json")) continue;
    const int64_t step = std::stoll(m[1]);
    if (!best || step > best->first) best = std::make_pair(step, e.path());
  }
  if (!best) return std::nullopt;
  return best->second;
}

CheckpointInfo load_checkpoint(const fs::path& step_dir, ShardedModel& model,
                               optim::AdamW* optimizer, ShardSets* extra) {
  const CheckpointMetadata meta = read_checkpoint_metadata(step_dir);
  if (extra != nullptr) {
    const auto& kinds = meta.shard_sets;
    for (const auto& [kind, set] : *extra) {
      if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
        throw Error(fmt::format("checkpoint {} has no '{}' tensors (it holds: model{}{}): it was not saved by a run "
                                "that keeps them",
                                step_dir.string(), kind, kinds.empty() ? "" : ", ", fmt::join(kinds, ", ")));
      }
    }
  }
  const RankFiles rf = open_rank_files(step_dir, meta);
  const auto index = param_index(*model.model);
  const bool with_optimizer = optimizer != nullptr && meta.has_optimizer;
  std::vector<optim::AdamWParamState> states(index.size());
  at::NoGradGuard no_grad;
  for (auto& [name, sp] : fsdp::sharded_state_dict(*model.model)) {
    const auto recorded = meta.shapes.find(name);
    if (recorded == meta.shapes.end()) {
      throw Error(fmt::format("checkpoint {} has no parameter '{}': it was saved from another "
                              "model",
                              step_dir.string(), name));
    }
    const auto& shape = recorded->second;
    TESSEL_CHECK(shape == model.global_shape(name, sp.spec.global_shape()), "checkpoint shape of {} differs from the model's",
                 name);
    // Only the rows this rank holds (its tp piece, then its FSDP rows) are read.
    const tensor::BoxMap dst_map = local_shard_map(model, name, sp);
    fill_from_rank_files(rf, "model", name, shape, dst_map, sp.local, step_dir);
    if (with_optimizer) {
      auto& st = states.at(index.at(name));
      st.exp_avg = at::zeros_like(sp.local, at::MemoryFormat::Contiguous);
      st.exp_avg_sq = at::zeros_like(sp.local, at::MemoryFormat::Contiguous);
      fill_from_rank_files(rf, "exp_avg", name, shape, dst_map, st.exp_avg, step_dir);
      fill_from_rank_files(rf, "exp_avg_sq", name, shape, dst_map, st.exp_avg_sq, step_dir);
    }
    if (extra != nullptr) {
      for (auto& [kind, set] : *extra) fill_from_rank_files(rf, kind, name, shape, dst_map, set.at(name), step_dir);
    }
  }
  if (with_optimizer) optimizer->load_state(model.optimizer_state_from_params(std::move(states)), meta.optimizer_step);
  CheckpointInfo info;
  info.step = meta.step;
  info.sampler = meta.sampler;
  info.metrics = meta.metrics;
  return info;
}

std::vector<std::pair<std::string, at::Tensor>> load_full_tensors(const fs::path& step_dir,
                                                                  const std::string& kind) {
  const CheckpointMetadata meta = read_checkpoint_metadata(step_dir);
  const RankFiles rf = open_rank_files(step_dir, meta);
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [name, shape] : meta.shapes) {
    at::Tensor full = at::empty(shape, at::kFloat);
    fill_from_rank_files(rf, kind, name, shape, tensor::whole_tensor_map(shape), full, step_dir);
    out.emplace_back(name, std::move(full));
  }
  return out;
}


}  // namespace tessel::train
