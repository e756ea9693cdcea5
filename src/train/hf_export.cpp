#include "train/hf_export.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <nlohmann/json.hpp>
#include <set>
#include <fmt/ranges.h>

#include "core/error.h"
#include "fsdp/state_dict.h"
#include "io/atomic_file.h"
#include "io/confined_file.h"
#include "io/hf_checkpoint.h"
#include "io/hf_export_layout.h"
#include "io/hf_export_writer.h"
#include "io/safetensors_dtype.h"
#include "io/staged_directory.h"
#include "models/model_config.h"
#include "models/registry.h"
#include "train/checkpoint.h"
#include "train/checkpoint_manifest.h"
#include "train/model_files.h"
#include "train/rank_files.h"
#include "train/shard_loading.h"

namespace tessel::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A slice of a tensor streamed out of a checkpoint: bounds the memory of
// `tessel convert` whatever the size of the largest parameter.
constexpr int64_t kSliceBytes = int64_t{16} << 20;

// The model's tensors in its own order (HF's state_dict order), from a build
// on the meta device: every name and global shape, the other ep ranks'
// experts included, without memory.
io::HfExportLayout export_layout(const models::ModelConfig& config, const HfExportOptions& options) {
  models::BuildOptions meta;
  meta.device = c10::Device(c10::kMeta);
  const auto model = models::build_model(config, meta);
  std::vector<io::ExportTensor> tensors;
  for (const auto& item : model->named_parameters()) tensors.push_back({item.key(), item.value().sizes().vec()});
  return io::HfExportLayout(std::move(tensors), options.dtype, options.max_shard_bytes);
}

// config.json with the export's dtype; a config that also has transformers'
// newer "dtype" key gets it there too, so the two never disagree.
std::string export_config_json(const models::ModelConfig& config, at::ScalarType dtype) {
  models::ModelConfig written = config;
  written.torch_dtype = io::torch_dtype_name(dtype);
  json j = json::parse(models::to_config_json(written));
  if (j.contains("dtype")) j["dtype"] = written.torch_dtype;
  return j.dump(2) + "\n";
}

// Everything besides the weights, into the staging directory.
ExportSummary write_beside_weights(const fs::path& staging, const io::HfExportLayout& layout,
                                   const models::ModelConfig& config,
                                   const std::map<std::string, fs::path>& model_files) {
  io::write_file_atomically(staging / io::kHfConfigFile, export_config_json(config, layout.dtype()));
  if (layout.sharded()) io::write_file_atomically(staging / io::kHfSafetensorsIndexFile, layout.index_json());
  ExportSummary summary;
  for (const auto& [name, digest] : copy_model_files(model_files, staging)) summary.model_files.push_back(name);
  summary.weight_files = layout.files().size();
  summary.weight_bytes = layout.total_bytes();
  return summary;
}

// The checkpoint holds exactly the tensors of its config.json's model, with
// their shapes.
void check_recorded_shapes(const io::HfExportLayout& layout, const CheckpointMetadata& meta, const fs::path& step_dir,
                           const std::string& architecture) {
  for (const io::ExportTensor& t : layout.tensors()) {
    const auto it = meta.shapes.find(t.name);
    if (it == meta.shapes.end()) {
      throw UsageError(fmt::format("checkpoint {} has no parameter '{}', which {} (its config.json) has: the "
                                   "checkpoint and its config.json do not belong together",
                                   step_dir.string(), t.name, architecture));
    }
    if (it->second != t.shape) {
      throw UsageError(fmt::format("checkpoint {}: '{}' has shape [{}] in metadata.json but [{}] in the model of "
                                   "its config.json: the checkpoint and its config.json do not belong together",
                                   step_dir.string(), t.name, fmt::join(it->second, ", "), fmt::join(t.shape, ", ")));
    }
  }
  std::set<std::string> names;
  for (const io::ExportTensor& t : layout.tensors()) names.insert(t.name);
  for (const auto& [name, shape] : meta.shapes) {
    if (!names.contains(name)) {
      throw UsageError(fmt::format("checkpoint {} holds '{}', which is not a parameter of {} (its config.json)",
                                   step_dir.string(), name, architecture));
    }
  }
}

// One tensor out of the rank files into the export, slice by slice along dim 0.
void stream_tensor(const RankFiles& rf, const io::ExportTensor& t, io::HfExportWriter& writer,
                   at::ScalarType dtype, const fs::path& step_dir) {
  const std::vector<int64_t>& shape = t.shape;
  if (shape.empty()) {
    const at::Tensor value = at::empty({}, dtype);
    fill_from_rank_files(rf, "model", t.name, shape, tensor::whole_tensor_map(shape), value, step_dir);
    writer.write_box(t.name, {}, value);
    return;
  }
  int64_t row_bytes = at::elementSize(dtype);
  for (size_t d = 1; d < shape.size(); ++d) row_bytes *= shape[d];
  const int64_t rows_per_slice = std::max<int64_t>(1, kSliceBytes / std::max<int64_t>(row_bytes, 1));
  for (int64_t r0 = 0; r0 < shape[0]; r0 += rows_per_slice) {
    std::vector<int64_t> slice_shape = shape;
    slice_shape[0] = std::min(rows_per_slice, shape[0] - r0);
    std::vector<int64_t> at_row(shape.size(), 0);
    at_row[0] = r0;
    const tensor::BoxMap slice_map = {tensor::BoxSegment{at_row, std::vector<int64_t>(shape.size(), 0), slice_shape}};
    const at::Tensor slice = at::empty(slice_shape, dtype);
    fill_from_rank_files(rf, "model", t.name, shape, slice_map, slice, step_dir);
    writer.write_box(t.name, at_row, slice);
  }
}

// Collective: every rank learns whether any failed; the failed ones rethrow
// their own error, the others say which rank failed while `doing`.
void all_succeeded_or_throw(dist::Communicator& world, const std::exception_ptr& error, std::string_view doing) {
  const at::Tensor failed = at::tensor({static_cast<int64_t>(error ? world.rank() + 1 : 0)}, at::kLong);
  world.all_reduce(failed, dist::ReduceOp::Max);
  if (error) std::rethrow_exception(error);
  const int64_t rank = failed.item<int64_t>() - 1;
  if (rank >= 0) throw Error(fmt::format("rank {} failed {}; its error says why", rank, doing));
}

}  // namespace

at::ScalarType export_dtype_from_name(const std::string& name, std::string_view what) {
  const auto type = io::floating_type_from_torch_name(name);
  if (!type || *type == at::kDouble) {
    throw UsageError(fmt::format("{}: '{}' is not an export dtype; use bfloat16 (what serving engines load), "
                                 "float16 or float32 (the checkpoint's values exactly)",
                                 what, name));
  }
  return *type;
}

ExportSummary export_checkpoint(const fs::path& ckpt, const fs::path& out, const HfExportOptions& options) {
  const std::string_view what = "convert: the output directory";
  io::check_new_directory(out, what);
  const fs::path step_dir = resolve_checkpoint(ckpt);
  verify_checkpoint(step_dir);
  const CheckpointMetadata meta = read_checkpoint_metadata(step_dir);
  const std::string where = fmt::format("checkpoint {}", step_dir.string());
  const models::ModelConfig config = models::load_model_config(io::confined_file(step_dir, io::kHfConfigFile, where));
  const io::HfExportLayout layout = export_layout(config, options);
  check_recorded_shapes(layout, meta, step_dir, config.architecture);
  std::map<std::string, fs::path> model_files;
  for (const std::string& name : meta.model_files.names) model_files[name] = io::confined_file(step_dir, name, where);
  const RankFiles rf = open_rank_files(step_dir, meta);

  const fs::path staging = io::begin_staging(out, what);
  try {
    io::create_export_files(staging, layout);
    io::HfExportWriter writer(staging, layout);
    for (const io::ExportTensor& t : layout.tensors()) stream_tensor(rf, t, writer, layout.dtype(), step_dir);
    writer.finish();
    ExportSummary summary = write_beside_weights(staging, layout, config, model_files);
    io::commit_staging(staging, out);
    summary.step_dir = step_dir;
    return summary;
  } catch (...) {
    io::abandon_staging(staging);
    throw;
  }
}

ExportSummary export_sharded_model(const ShardedModel& model, const dist::DeviceMesh& mesh, const fs::path& out,
                                   const HfExportOptions& options,
                                   const std::map<std::string, fs::path>& model_files) {
  dist::Communicator& world = *mesh.world();
  const models::ModelConfig& config = model.model->config();
  const io::HfExportLayout layout = export_layout(config, options);
  const fs::path staging = io::staging_directory(out);
  const std::string_view what = "the Hugging Face export";
  std::exception_ptr error;
  if (world.rank() == 0) {
    try {
      io::begin_staging(out, what);
      io::create_export_files(staging, layout);
    } catch (...) {
      error = std::current_exception();
    }
  }
  all_succeeded_or_throw(world, error, "to create the export's files");

  int64_t written = 0;
  try {
    io::HfExportWriter writer(staging, layout);
    at::NoGradGuard no_grad;
    for (auto& [name, sp] : fsdp::sharded_state_dict(*model.model)) {
      if (!writes_its_elements(model, mesh, name)) continue;
      for (const tensor::BoxSegment& seg : local_shard_map(model, name, sp)) {
        writer.write_box(name, seg.global_offset, box_view(sp.local, seg.local_offset, seg.shape));
        written += seg.numel();
      }
    }
    writer.finish();
  } catch (...) {
    error = std::current_exception();
  }
  const auto abandon_on_rank0 = [&] {
    if (world.rank() == 0) io::abandon_staging(staging);
  };
  try {
    all_succeeded_or_throw(world, error, "writing its part of the export");
  } catch (...) {
    abandon_on_rank0();
    throw;
  }
  // Each element exactly once: what the ranks wrote adds up to the model.
  const at::Tensor total = at::tensor({written}, at::kLong);
  world.all_reduce(total, dist::ReduceOp::Sum);
  int64_t expected = 0;
  for (const io::ExportTensor& t : layout.tensors()) {
    int64_t n = 1;
    for (int64_t d : t.shape) n *= d;
    expected += n;
  }
  if (total.item<int64_t>() != expected) {
    abandon_on_rank0();
    throw Error(fmt::format("the ranks wrote {} elements of the Hugging Face export, but the model has {}: the "
                            "mesh's shards do not cover the model exactly once",
                            total.item<int64_t>(), expected));
  }
  ExportSummary summary;
  if (world.rank() == 0) {
    try {
      summary = write_beside_weights(staging, layout, config, model_files);
      io::commit_staging(staging, out);
    } catch (...) {
      io::abandon_staging(staging);
      error = std::current_exception();
    }
  }
  all_succeeded_or_throw(world, error, "to finish the export");
  return summary;
}

}  // namespace tessel::train
