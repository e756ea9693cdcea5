// Hugging Face exports (train/hf_export.h) of models laid out over 4 ranks,
// checked against what transformers itself computes (tests/golden/export,
// generate_export.py): the golden models of tests/golden (every family: tied
// embeddings, q/k/v biases, mixture of experts, windows, q/k norms) are loaded from an HF directory that also
// holds a tokenizer and a generation config, laid out on FSDP 4, TP 2 x FSDP 2
// or EP 2 x FSDP 2, and
//   - saved as a checkpoint, then exported by `tessel convert`'s function in
//     one process, float32 in one file and bfloat16 in shards;
//   - exported by every rank from its shards (what training writes).
// Each export loads as an HF directory and its logits on the golden tokens
// equal transformers' for the same weights in the export's dtype; config.json
// says that dtype; the index lists every tensor once with HF's file names and
// total size; the tokenizer and generation files are the model's, byte for byte.
// A run with checkpointing.save_consolidated leaves that directory in each
// saved step, holding the step's checkpointed parameters.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "config/parallelism_config.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "io/safetensors_file.h"
#include "models/golden_data.h"
#include "models/pretrained.h"
#include "train/checkpoint.h"
#include "train/checkpoint_manifest.h"
#include "train/hf_export.h"
#include "train/memory.h"
#include "train/layout_parity.h"
#include "train/model_files.h"
#include "train/model_setup.h"
#include "train/moe_parity.h"
#include "train/mpi/memory_testing.h"
#include "train/train_fixture.h"
#include "train/train_options.h"
#include "train/trainer.h"

namespace tessel::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct ExportCase {
  const char* golden;  // tests/golden/<golden>, tests/golden/export/<golden>.json
  const char* layout;
  int tp = 1;
  int ep = 1;
};

const ExportCase kCases[] = {
    {"llama_tied", "FSDP 4"}, {"llama_tied", "TP 2 x FSDP 2", 2},   {"qwen2", "TP 2 x FSDP 2", 2},
    {"qwen3_moe", "FSDP 4"},  {"qwen3_moe", "EP 2 x FSDP 2", 1, 2}, {"mixtral", "EP 2 x FSDP 2", 1, 2},
    {"mistral", "FSDP 4"},    {"qwen3", "TP 2 x FSDP 2", 2},        {"gemma3", "FSDP 4"},
};

class HfExport : public testing::TrainFixture {
 protected:
  void SetUp() override {
    TrainFixture::SetUp();
    if (dist::world()->size() != 4) GTEST_SKIP() << "written for 4 ranks";
    shared_ = testing::shared_dir("hf_export");
    if (rank0()) fs::create_directories(shared_);
    dist::world()->barrier();
  }
  void TearDown() override {
    if (dist::world()->size() == 4) {
      dist::world()->barrier();
      if (rank0()) fs::remove_all(shared_);
    }
    TrainFixture::TearDown();
  }
  static bool rank0() { return dist::world()->rank() == 0; }

  // An HF directory as a user downloads one: the golden model's config and
  // weights with the tokenizer and generation files beside them.
  fs::path model_dir(const std::string& golden) {
    const fs::path dir = shared_ / ("model_" + golden);
    if (rank0() && !fs::exists(dir)) {
      fs::create_directories(dir);
      for (const char* name : {"config.json", "model.safetensors"}) fs::copy_file(models::golden::golden_dir(golden) / name, dir / name);
      for (const auto& entry : fs::directory_iterator(models::golden::golden_dir("export") / "model_files")) {
        fs::copy_file(entry.path(), dir / entry.path().filename());
      }
    }
    dist::world()->barrier();
    return dir;
  }

  config::Config run_config(const fs::path& model, const ExportCase& c) const {
    return make_config({"policy.model_name='" + model.string() + "'", "policy.dtensor_cfg._v2=true",
                        "policy.dtensor_cfg.tensor_parallel_size=" + std::to_string(c.tp),
                        "policy.dtensor_cfg.expert_parallel_size=" + std::to_string(c.ep)});
  }

  static dist::DeviceMesh mesh_of(const ExportCase& c) {
    dist::MeshSizes sizes = testing::moe_sizes(4, 1, c.ep);
    sizes.tp = c.tp;
    return testing::block_mesh(sizes);
  }

  // What every export must be: an HF directory whose logits on the golden
  // tokens are transformers' for the golden weights in `dtype`, carrying
  // the model's tokenizer and generation files.
  static void expect_transformers_model(const fs::path& out, const std::string& golden, const std::string& dtype,
                                        const std::string& what) {
    SCOPED_TRACE(what);
    const json config = json::parse(read_bytes(out / "config.json"));
    EXPECT_EQ(config.value("torch_dtype", ""), dtype);
    const json want = json::parse(read_bytes(models::golden::golden_dir("export") / (golden + ".json")));
    auto model = models::load_pretrained(out);
    at::NoGradGuard no_grad;
    const at::Tensor tokens = models::golden::to_tensor(want["tokens"], at::kLong);
    const at::Tensor got = model->forward_logits(tokens).to(at::kDouble);
    const at::Tensor expected = models::golden::to_tensor(want["logits_" + dtype], at::kDouble);
    ASSERT_EQ(got.sizes(), expected.sizes());
    // transformers and tessel both run float32 from the same (rounded)
    // weights: they differ by float32 reordering only.
    const double worst = (got - expected).abs().max().item<double>();
    EXPECT_LE(worst, 2e-5) << "logits differ from transformers' by " << worst;
    for (const auto& entry : fs::directory_iterator(models::golden::golden_dir("export") / "model_files")) {
      const fs::path copy = out / entry.path().filename();
      ASSERT_TRUE(fs::is_regular_file(copy)) << copy << " was not carried";
      EXPECT_EQ(read_bytes(copy), read_bytes(entry.path())) << copy;
    }
    EXPECT_FALSE(fs::exists(out.parent_path() / ("." + out.filename().string() + ".partial")));
  }

  // The sharded layout as transformers writes it: model-0000k-of-0000N files,
  // the index naming each tensor of the model once, total_size its bytes.
  static void expect_sharded_as_hf(const fs::path& out, const fs::path& model, int64_t element_bytes) {
    const json index = json::parse(read_bytes(out / "model.safetensors.index.json"));
    std::set<std::string> files;
    int64_t bytes = 0;
    const auto source = io::SafetensorsFile::open(model / "model.safetensors");
    std::set<std::string> expected_names;
    for (const auto& info : source.tensors()) {
      expected_names.insert(info.name);
      int64_t n = element_bytes;
      for (int64_t d : info.shape) n *= d;
      bytes += n;
    }
    std::set<std::string> names;
    for (const auto& [name, file] : index["weight_map"].items()) {
      names.insert(name);
      files.insert(file.get<std::string>());
    }
    EXPECT_EQ(names, expected_names);
    EXPECT_EQ(index["metadata"]["total_size"].get<int64_t>(), bytes);
    ASSERT_GT(files.size(), 1u);
    for (size_t k = 1; k <= files.size(); ++k) {
      const std::string name = fmt::format("model-{:05d}-of-{:05d}.safetensors", k, files.size());
      EXPECT_TRUE(files.contains(name)) << name;
      EXPECT_TRUE(fs::is_regular_file(out / name)) << name;
    }
    EXPECT_FALSE(fs::exists(out / "model.safetensors"));
  }

  fs::path shared_;
};

TEST_F(HfExport, CheckpointsOfEveryLayoutExportAsTheModelTransformersComputes) {
  for (const ExportCase& c : kCases) {
    const std::string what = std::string(c.golden) + " on " + c.layout;
    SCOPED_TRACE(what);
    const fs::path model = model_dir(c.golden);
    const config::Config config = run_config(model, c);
    const dist::DeviceMesh mesh = mesh_of(c);
    ShardedModel sharded = setup_model(train_options_from(config), mesh, config::parallelism_from(config));
    const fs::path ckpt = shared_ / "ckpt";
    save_checkpoint(ckpt, CheckpointInfo{1, {}, {}}, sharded, nullptr, mesh, config, KeepPolicy{});

    // The end-of-training export, each rank writing its own shards.
    HfExportOptions parallel;
    parallel.max_shard_bytes = 40'000;
    export_sharded_model(sharded, mesh, shared_ / "from_ranks", parallel,
                         find_model_files(model_file_sources(config)));
    if (rank0()) {
      expect_transformers_model(shared_ / "from_ranks", c.golden, "float32", what + ", written by the ranks");
      expect_sharded_as_hf(shared_ / "from_ranks", model, 4);

      // tessel convert: float32 in one file, bfloat16 in shards.
      const ExportSummary one = export_checkpoint(ckpt, shared_ / "f32", {});
      EXPECT_EQ(one.weight_files, 1u);
      EXPECT_TRUE(fs::is_regular_file(shared_ / "f32" / "model.safetensors"));
      EXPECT_FALSE(fs::exists(shared_ / "f32" / "model.safetensors.index.json"));
      expect_transformers_model(shared_ / "f32", c.golden, "float32", what + ", converted to float32");
      // The float32 export holds the checkpoint's values exactly: the golden weights.
      const auto exported = io::SafetensorsFile::open(shared_ / "f32" / "model.safetensors");
      const auto source = io::SafetensorsFile::open(model / "model.safetensors");
      for (const auto& info : source.tensors()) EXPECT_TRUE(exported.load(info.name).equal(source.load(info.name))) << info.name;

      HfExportOptions bf16;
      bf16.dtype = at::kBFloat16;
      bf16.max_shard_bytes = 20'000;
      const ExportSummary sharded_export = export_checkpoint(ckpt, shared_ / "bf16", bf16);
      EXPECT_GT(sharded_export.weight_files, 1u);
      expect_transformers_model(shared_ / "bf16", c.golden, "bfloat16", what + ", converted to bfloat16 in shards");
      expect_sharded_as_hf(shared_ / "bf16", model, 2);
      for (const char* out : {"ckpt", "from_ranks", "f32", "bf16"}) fs::remove_all(shared_ / out);
    }
    dist::world()->barrier();
  }
}

TEST_F(HfExport, TrainingWritesTheHfDirectoryWithEachCheckpoint) {
  // checkpointing.save_consolidated: steps 2 and 4 of a TP 2 x FSDP 2 run each
  // hold consolidated/, bfloat16 in shards, whose tensors are that step's
  // checkpointed parameters rounded to bfloat16.
  const fs::path ckpt = shared_ / "run";
  const std::vector<std::string> o = {"sft.max_num_steps=4", "checkpointing.enabled=true",
                                      "checkpointing.save_period=2", "checkpointing.keep_top_k=null",
                                      "checkpointing.checkpoint_dir='" + ckpt.string() + "'",
                                      "checkpointing.save_consolidated=true", "checkpointing.consolidated_dtype=bfloat16",
                                      "checkpointing.consolidated_max_shard_size=100KB",
                                      "policy.dtensor_cfg.tensor_parallel_size=2", "policy.train_micro_batch_size=2"};
  train(make_config(o), testing::mesh_for(testing::kLayouts[1]), testing::quiet());
  if (rank0()) {
    for (int step : {2, 4}) {
      const fs::path hf = checkpoint_step_dir(ckpt, step) / kConsolidatedDirName;
      SCOPED_TRACE(hf.string());
      const json index = json::parse(read_bytes(hf / "model.safetensors.index.json"));
      EXPECT_EQ(json::parse(read_bytes(hf / "config.json"))["torch_dtype"], "bfloat16");
      std::map<std::string, io::SafetensorsFile> files;
      for (const auto& [name, file] : index["weight_map"].items()) {
        const std::string f = file.get<std::string>();
        if (!files.contains(f)) files.emplace(f, io::SafetensorsFile::open(hf / f));
      }
      size_t tensors = 0;
      for (const auto& [name, full] : load_full_tensors(checkpoint_step_dir(ckpt, step))) {
        ASSERT_TRUE(index["weight_map"].contains(name)) << name;
        const at::Tensor got = files.at(index["weight_map"][name].get<std::string>()).load(name);
        EXPECT_EQ(got.scalar_type(), at::kBFloat16) << name;
        EXPECT_TRUE(got.equal(full.to(at::kBFloat16))) << name;
        ++tensors;
      }
      EXPECT_EQ(tensors, index["weight_map"].size());
      // The checkpoint is still whole and resumable beside it.
      EXPECT_NO_THROW(verify_checkpoint(checkpoint_step_dir(ckpt, step)));
    }
  }
  EXPECT_THROW(train_options_from(make_config({"checkpointing.enabled=false", "checkpointing.save_consolidated=true"})),
               UsageError);
}

TEST_F(HfExport, WritingFromTheRanksAddsAtMostOneParameterPerRank) {
  // A 0.67 GB qwen2 model on FSDP 4: each rank holds 168 MB of shards; a
  // rank that gathered the model, or its largest parameter (the tied
  // embedding, 131 MB) and a few layers, would pass the bound. Each rank's
  // growth is its own VmHWM above its VmRSS before the export, the
  // high-water mark reset first (/proc/self/clear_refs).
  const std::string config_json = R"({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2",
    "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 12, "num_attention_heads": 16,
    "num_key_value_heads": 4, "vocab_size": 32000, "tie_word_embeddings": true, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0, "max_position_embeddings": 4096, "hidden_act": "silu", "torch_dtype": "float32"})";
  const fs::path model = shared_ / "large";
  if (rank0()) models::save_initialized(models::parse_model_config(config_json, "test config"), 3, at::kFloat, model);
  dist::world()->barrier();
  const config::Config config = make_config({"policy.model_name='" + model.string() + "'"});
  const dist::DeviceMesh mesh = testing::mesh_for(testing::kLayouts[0]);
  ShardedModel sharded = setup_model(train_options_from(config), mesh, config::parallelism_from(config));
  const int64_t largest = int64_t{32000} * 1024 * 4;
  std::ofstream reset("/proc/self/clear_refs");
  reset << "5" << std::flush;
  if (!reset) GTEST_SKIP() << "this kernel does not reset VmHWM through /proc/self/clear_refs";
  const int64_t before = current_rss_bytes();
  HfExportOptions bf16;  // converted on the way: the writer's staging counts
  bf16.dtype = at::kBFloat16;
  export_sharded_model(sharded, mesh, shared_ / "large_hf", bf16, {});
  const int64_t growth = peak_rss_bytes() - before;
  std::printf("rank %d: the export from the ranks raised VmHWM %.1f MiB above VmRSS %.1f MiB\n", dist::world()->rank(),
              static_cast<double>(growth) / (1 << 20), static_cast<double>(before) / (1 << 20));
  EXPECT_LE(growth, largest + (int64_t{256} << 20));
  dist::world()->barrier();
  if (rank0()) {
    EXPECT_TRUE(fs::is_regular_file(shared_ / "large_hf" / "model.safetensors"));
  }
}

}  // namespace
}  // namespace tessel::train
