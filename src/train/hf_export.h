// Hugging Face model directories from what training holds, streamed so that
// no process ever holds the whole model: transformers, vLLM and the hub take
// the result as it is.
//
// What is written (io/hf_export_layout.h): config.json (the run's model
// config, "torch_dtype" set to the export's dtype), the weights under HF's
// names in model order, in one model.safetensors or, past the shard size,
// in model-0000k-of-0000N.safetensors shards with
// model.safetensors.index.json, and the tokenizer and generation files of
// the model the run started from (train/model_files.h). The directory is
// written under a hidden name and renamed into place once complete
// (io/staged_directory.h); an existing non-empty directory is refused.
//
// Two writers of the same bytes:
//   - export_checkpoint (`tessel convert`): one process reads a checkpoint
//     step's rank files, tensor by tensor in slices of at most 16 MiB, each
//     slice read from exactly the rank-file boxes that cover it
//     (train/rank_files.h) and written at its place: memory stays at about
//     two slices whatever the model's size.
//   - export_sharded_model (checkpointing.save_consolidated: a step's
//     consolidated/ directory): every rank writes the boxes of the
//     parameters it owns straight from its shards into the shared files, in
//     parallel (each element once, as a checkpoint: writes_its_elements);
//     rank 0 creates the files and writes config.json, the index and the
//     carried files. Nothing is gathered. The ranks must see one file
//     system there (as they must for the checkpoint directory).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "dist/device_mesh.h"
#include "io/hf_checkpoint_writer.h"
#include "train/model_setup.h"

namespace tessel::train {

struct HfExportOptions {
  at::ScalarType dtype = at::kFloat;  // float32, bfloat16 or float16
  uint64_t max_shard_bytes = io::kDefaultMaxShardBytes;
};

// "float32", "bfloat16" or "float16" as a dtype; UsageError naming `what`
// (e.g. "--dtype") for anything else.
at::ScalarType export_dtype_from_name(const std::string& name, std::string_view what);

struct ExportSummary {
  std::filesystem::path step_dir;        // the checkpoint step exported (export_checkpoint)
  size_t weight_files = 0;               // safetensors files
  uint64_t weight_bytes = 0;             // tensor data in them
  std::vector<std::string> model_files;  // the carried files written beside them
};

// `tessel convert`: exports the model of `ckpt` (a step_<N> directory, or a
// checkpoint_dir whose latest step is taken) into the new directory `out`.
// The step's files are checked against its manifest first. UsageError for an
// existing non-empty `out`, a damaged or incomplete checkpoint (naming the
// file), or one whose tensors do not match its config.json; nothing is left
// at `out` after any error.
ExportSummary export_checkpoint(const std::filesystem::path& ckpt, const std::filesystem::path& out,
                                const HfExportOptions& options);

// Collective over the mesh's world: the sharded model as a Hugging Face
// directory at `out`, `model_files` (name -> file, find_model_files) carried.
// Every rank throws when any rank fails; nothing is left at `out` then.
ExportSummary export_sharded_model(const ShardedModel& model, const dist::DeviceMesh& mesh,
                                   const std::filesystem::path& out, const HfExportOptions& options,
                                   const std::map<std::string, std::filesystem::path>& model_files);

}  // namespace tessel::train
