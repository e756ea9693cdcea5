// Training checkpoints (SPEC 6): each rank writes its own shards, rank 0 one
// metadata file, and the whole step appears atomically. Every element is
// written once: only dp_replicate coordinate 0 writes (HSDP's other replicas
// hold copies), and a parameter tp does not split is written by tp rank 0
// only. Under expert parallelism an expert lives on one ep rank's ep_shard
// group, which spans dp_replicate: each holder writes its rows, and
// metadata.json names every parameter (the other ep ranks' experts too), so
// the checkpoint resumes on any ep size.
//
// Layout of <checkpointing.checkpoint_dir>/step_<N>/:
//   rank_<r>.safetensors  this rank's local fp32 shards it writes: "model/<name>",
//                         with save_optimizer "exp_avg/<name>",
//                         "exp_avg_sq/<name>" (per parameter shard also when
//                         the optimizer is split over replicas: gathered
//                         from their parts), and the recipe's other sets
//                         laid out like the model ("reference/<name>": the
//                         policy DPO and GRPO stay close to); the header metadata records
//                         each shard's first row in this rank's tp piece
//                         (dim0_offsets, JSON) and the rank's tp coordinate
//   metadata.json         step, world size, mesh, tp size and the parameters
//                         split over tp (dim, packed parts), global shapes, optimizer
//                         step, data sampler position, the metrics of the
//                         step ("train:loss", ...; rank 0), and every other
//                         file's size and xxHash64 ("files",
//                         checkpoint_manifest.h), checked before a load;
//                         read through checkpoint_metadata.h, which checks
//                         every field and that every file name stays in
//                         the step directory (io/confined_file.h)
//   config.json           the model's Hugging Face config (for `tessel convert`)
//   config.yaml           the run's resolved config
//   tokenizer.json, ...   copies of the tokenizer and generation files of the
//                         run's model (train/model_files.h; metadata.json's
//                         "model_files" names them and where they came from)
// Saving writes into .step_<N>.tmp; each file is fsync'ed as it is written,
// metadata.json (the commit marker) last, once every rank's file is durable;
// then the directory is renamed to step_<N>. A crash mid-save leaves the
// previous checkpoints untouched and never a half-written step_<N>; the next
// save removes such leftovers.
//
// Loading reads, for each parameter, only the rows the loading rank holds:
// the boxes of the global tensor each rank file covers (its tp piece, its
// rows) are intersected with the loading rank's own (train/shard_loading.h),
// so a checkpoint resumes on any other world size, tp or dp_replicate layout
// and no rank ever assembles a full tensor.
// Randomness: the model is initialised once and the data order is a pure
// function of (seed, epoch, position), so the sampler position is all the
// RNG state a resumed run needs.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "data/sampler.h"
#include "dist/device_mesh.h"
#include "optim/adamw.h"
#include "train/checkpoint_metadata.h"
#include "train/model_setup.h"

namespace tessel::train {

struct CheckpointInfo {
  int64_t step = 0;
  data::SamplerState sampler;
  // What the run knew of this step, by checkpointing.metric_name
  // ("train:loss", "val:val_loss", ...); a metric it did not measure at this
  // step is absent.
  std::map<std::string, double> metrics;
};

// Tensors laid out exactly like the model's own local shards, kept by a
// checkpoint beside them: kind ("reference") -> parameter name -> this rank's
// shard. Written and resharded like the parameters.
using ShardSets = std::map<std::string, std::map<std::string, at::Tensor>>;

// Which complete checkpoints a save leaves (checkpointing.keep_top_k,
// metric_name, higher_is_better).
struct KeepPolicy {
  int64_t top_k = 0;        // <= 0: keep all
  std::string metric_name;  // a key of CheckpointInfo::metrics; empty: by recency
  bool higher_is_better = false;
};

// Collective over the mesh's world. Then keeps the `keep.top_k` best steps by
// `keep.metric_name` (steps without it rank last; ties go to the more recent)
// and always the newest step, so the run can resume.
// `extra`: more shard sets to keep (ShardSets).
void save_checkpoint(const std::filesystem::path& dir, const CheckpointInfo& info,
                     ShardedModel& model, const optim::AdamW* optimizer,
                     const dist::DeviceMesh& mesh, const config::Config& run_config,
                     const KeepPolicy& keep, const ShardSets& extra = {});

// <dir>/step_<step>, and back: the N of a step_<N> directory.
std::filesystem::path checkpoint_step_dir(const std::filesystem::path& dir, int64_t step);
int64_t checkpoint_step(const std::filesystem::path& step_dir);

// The step_<N> directory with the largest N under `dir`, if any. One rank's
// view of the directory: a run resumes from agreed_latest_checkpoint()
// (resume_point.h) instead, which all ranks share.
std::optional<std::filesystem::path> latest_checkpoint(const std::filesystem::path& dir);

// Restores parameters (and the optimizer state and step when `optimizer` is
// given and the checkpoint has them) into the sharded model, and every set
// of `extra` (its tensors allocated like the shards) from the checkpoint's
// set of that kind. Throws tessel::Error naming the file and tensor when they
// do not match, or the kind when the checkpoint has no such set.
CheckpointInfo load_checkpoint(const std::filesystem::path& step_dir, ShardedModel& model,
                               optim::AdamW* optimizer, ShardSets* extra = nullptr);

// Every parameter of the checkpoint as a full tensor (`kind` "model",
// "exp_avg" or "exp_avg_sq"), by name.
std::vector<std::pair<std::string, at::Tensor>> load_full_tensors(
    const std::filesystem::path& step_dir, const std::string& kind = "model");

// Whether this rank writes its shard of `name` when every element is written
// once (checkpoints, Hugging Face exports): not an HSDP replica's copy
// (dp_replicate > 0), nor a tp rank > 0's copy of a parameter tp does not
// split; an expert's rows always (nobody else holds them).
bool writes_its_elements(const ShardedModel& model, const dist::DeviceMesh& mesh, const std::string& name);

// A step's metadata.json, checked whole (train/checkpoint_metadata.h) before
// any other file of the step is opened.
CheckpointMetadata read_checkpoint_metadata(const std::filesystem::path& step_dir);

// `ckpt` when it is a step_<N> directory, else the latest complete step in
// it (a checkpoint_dir); UsageError when it is neither.
std::filesystem::path resolve_checkpoint(const std::filesystem::path& ckpt);

}  // namespace tessel::train
